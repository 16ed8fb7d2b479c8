"""Demo domain handlers of the compute flow, an external two-step (dispatch, then callback):

    analysis_request  analysis_dispatch  start_analysis_run  -> WAITING_EXTERNAL (dispatched)
    (the pipeline calls back: record_external_result, outcome READY, artifacts registered)
    analysis_qc_pending analysis_qc      record_analysis_qc  -> COMPLETED

The "external pipeline" is simulated inside the worker process: after pipeline_seconds it
posts the result callback through the worker's transport (over the API with HttpTransport).
If the worker dies meanwhile the subject honestly stays WAITING_EXTERNAL until an operator
reconciles it (requeue, hold or cancel; never a silent rollback); a result that comes back
after that is refused, since it names the revision its dispatch left. A reprocessing run (the
subject requeued to analysis_dispatch) records the artifacts it reprocesses in its dispatch
metadata; earlier artifacts stay linked.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from bloomops.execution.errors import ActionError
from bloomops.worker.handling import HandlerSet, Job, Outcome, TerminalError
from bloomops.worker.runtime import WorkerRuntime

log = logging.getLogger(__name__)

ARTIFACT = "data/analysis/artifact/1.0"


@dataclass
class PendingRun:
    subject_euid: str
    run_id: str
    due: float
    next_queue_key: str | None
    assay: str | None
    # the subject's revision its dispatch left: the result is refused (STATE_CONFLICT) once
    # an operator has given the run up, even if the subject was sent out again since
    revision: int | None = None


class Handlers(HandlerSet):
    CAPABILITIES = ["compute.dispatch", "compute.qc"]
    HANDLERS = {"start_analysis_run": "start_analysis_run",
                "record_analysis_qc": "record_analysis_qc"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pending: list[PendingRun] = []
        self.pipeline_seconds = float(self.options.get("pipeline_seconds") or 0.0)

    def start_analysis_run(self, job: Job) -> Outcome:
        self.maybe_fail(job, "pipeline dispatch")
        # Reprocessing: the artifacts of earlier runs (found through lineage) are its input.
        outputs = self.transport.history(job.subject_euid).get("outputs", [])
        previous = [o["euid"] for o in outputs if o.get("kind")]
        run_id = f"run-{uuid.uuid4().hex[:12]}"
        return Outcome(external={"pipeline": "bloom-secondary", "run_id": run_id,
                                 "queue_key": job.queue_key,
                                 "reprocess_of": previous},
                       result_snapshot={"domain_state": "RUNNING", "run_id": run_id})

    def after_complete(self, runtime: WorkerRuntime, job: Job, outcome: Outcome,
                       result: dict) -> None:
        if outcome.external is not None and result.get("state") == "WAITING_EXTERNAL":
            self.pending.append(PendingRun(
                subject_euid=job.subject_euid, run_id=outcome.external["run_id"],
                due=time.monotonic() + self.pipeline_seconds,
                next_queue_key=job.queue_config.get("default_next_queue_key"),
                assay=job.properties.get("assay"),
                revision=result["revision"] if type(result.get("revision")) is int else None))

    def busy(self) -> bool:
        return bool(self.pending)

    def poll(self, runtime: WorkerRuntime) -> None:
        now = time.monotonic()
        for run in [r for r in self.pending if r.due <= now]:
            self.pending.remove(run)
            artifacts = [
                {"template_code": ARTIFACT, "name": f"{run.run_id} {kind}",
                 "properties": {"kind": kind, "run_id": run.run_id, "assay": run.assay,
                                "uri": f"s3://demo-bucket/{run.run_id}/{kind}"}}
                for kind in ("bam", "vcf", "qc_report")
            ]
            payload = {"outcome": "READY" if run.next_queue_key else "COMPLETED",
                       "outputs": artifacts,
                       "result_snapshot": {"run_id": run.run_id, "status": "SUCCEEDED"}}
            if run.next_queue_key:
                payload["next_queue_key"] = run.next_queue_key
            try:
                expected = {} if run.revision is None else {"expected_revision": run.revision}
                runtime.transport.act("record_external_result", subject_euid=run.subject_euid,
                                      worker_euid=runtime.worker_euid,
                                      expected_state="WAITING_EXTERNAL",
                                      idempotency_key=f"pipeline-result:{run.run_id}",
                                      payload=payload, **expected)
            except ActionError as exc:
                if exc.code in ("CONCURRENT_UPDATE",):
                    self.pending.append(run)
                else:
                    # Refused for good (e.g. the next queue does not take the subject): the
                    # subject stays WAITING_EXTERNAL, where the workbench shows it; say why.
                    log.warning("pipeline result for %s refused: %s %s", run.subject_euid,
                                exc.code, exc.message)
            except Exception:
                # Not delivered (database or API away): keep it; the runtime backs off and
                # polls again, and the fixed idempotency key makes a repeat a replay.
                self.pending.append(run)
                raise

    def record_analysis_qc(self, job: Job) -> Outcome:
        self.maybe_fail(job, "analysis QC")
        if float(self.options.get("qc_reject_rate") or 0) > self.rng.random():
            raise TerminalError("Coverage below threshold.", error_class="PERMANENT_INPUT",
                                error_code="LOW_COVERAGE")
        return Outcome(result_snapshot={"domain_state": "COMPLETED",
                                        "coverage": round(25 + self.rng.random() * 15, 1)})
