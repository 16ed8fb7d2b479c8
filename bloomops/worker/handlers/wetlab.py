"""Demo domain handlers of the wet-lab chain:

    specimen      extraction_prod/_rnd   create_extraction       -> extracted sample
    extracted     post_extract_qc        record_post_extract_qc  -> qc_passed (or HELD)
    qc_passed     ilmn/ont_lib_prep      create_library_prep     -> library
    library       ilmn/ont_seq_pool      create_pool             -> pool
    pool          ilmn/ont_start_seq_run create_run              -> sequencing run

Each material-producing step creates its output object in the completing transaction (linked
from the execution record by execution_record_output); the output carries an execution
envelope that routes it to the next queue (the queue's default_next_queue_key), and the
consumed subject is COMPLETED. QC produces no new material: it routes the same extracted
sample to the library-prep queue of its platform, or stops the line with a hold.
"""

from __future__ import annotations

from typing import Any

from bloomops.worker.handling import HandlerSet, HoldError, Job, Outcome

EXTRACTED = "content/material/extracted_sample/1.0"
LIBRARY = "content/material/library/1.0"
POOL = "content/material/pool/1.0"
RUN = "content/material/sequencing_run/1.0"


def _carry(job: Job, domain_state: str, **extra: Any) -> dict[str, Any]:
    p = job.properties
    return {"site": p.get("site"), "platform": p.get("platform"), "assay": p.get("assay"),
            "domain_state": domain_state, "derived_from_euid": job.subject_euid, **extra}


def _routed_output(handlers: HandlerSet, job: Job, template_code: str, name: str,
                   domain_state: str, **extra: Any) -> dict[str, Any]:
    next_queue = job.queue_config.get("default_next_queue_key")
    out: dict[str, Any] = {"template_code": template_code, "name": name,
                           "properties": _carry(job, domain_state, **extra)}
    if next_queue:
        assert handlers.transport is not None
        config = handlers.transport.queue(next_queue)["config"]
        out["execution"] = {"state": "READY", "next_queue_key": next_queue,
                            "next_action_key": config.get("default_next_action_key"),
                            "priority": int(job.subject["execution"].get("priority") or 0),
                            "due_at": job.subject["execution"].get("due_at")}
    return out


class Handlers(HandlerSet):
    CAPABILITIES = ["wetlab.extraction", "wetlab.qc", "wetlab.libprep", "wetlab.pooling",
                    "wetlab.sequencing"]
    HANDLERS = {
        "create_extraction": "create_extraction",
        "record_post_extract_qc": "record_post_extract_qc",
        "create_library_prep": "create_library_prep",
        "create_pool": "create_pool",
        "create_run": "create_run",
    }

    def create_extraction(self, job: Job) -> Outcome:
        self.maybe_fail(job, "extraction")
        yield_ng = round(20 + self.rng.random() * 80, 1)
        return Outcome(
            outputs=[_routed_output(self, job, EXTRACTED, f"Extract of {job.subject['name']}",
                                    "extracted", yield_ng=yield_ng)],
            result_snapshot={"domain_state": "extracted", "yield_ng": yield_ng})

    def record_post_extract_qc(self, job: Job) -> Outcome:
        self.maybe_fail(job, "post-extraction QC")
        rin = round(5 + self.rng.random() * 5, 1)
        hold_rate = float(self.options.get("qc_hold_rate") or 0.0)
        if hold_rate and self.rng.random() < hold_rate:
            raise HoldError(f"QC borderline (RIN {rin}); needs review before library prep.",
                            error_code="QC_BORDERLINE")
        platform = job.properties.get("platform")
        next_queue = {"ont": "ont_lib_prep", "illumina": "ilmn_lib_prep"}.get(
            platform or "", job.queue_config.get("default_next_queue_key"))
        return Outcome(next_queue_key=next_queue,
                       result_snapshot={"domain_state": "qc_passed", "rin": rin,
                                        "concentration": round(10 + self.rng.random() * 90,
                                                               1), "qc": "pass"})

    def create_library_prep(self, job: Job) -> Outcome:
        self.maybe_fail(job, "library prep")
        name = f"Library of {job.subject['name']}"
        return Outcome(outputs=[_routed_output(self, job, LIBRARY, name, "library_prepared")],
                       result_snapshot={"domain_state": "library_prepared"})

    def create_pool(self, job: Job) -> Outcome:
        self.maybe_fail(job, "pooling")
        name = f"Pool of {job.subject['name']}"
        return Outcome(outputs=[_routed_output(self, job, POOL, name, "pooled")],
                       result_snapshot={"domain_state": "pooled"})

    def create_run(self, job: Job) -> Outcome:
        self.maybe_fail(job, "run start")
        run = {"template_code": RUN, "name": f"Run of {job.subject['name']}",
               "properties": _carry(job, "run_started")}
        return Outcome(outputs=[run], result_snapshot={"domain_state": "run_started"})
