"""Workers, the QA workbench (dead letters and holds, bulk actions) and admin tools."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.signatures import hold_people
from bloomops.execution import clock, people, selectors
from bloomops.execution.actions.subjects import hold_codes
from bloomops.execution.approvals import dead_letter_gate, hold_gates
from bloomops.execution.envelope import ts
from bloomops.execution.executor import ActionResult
from bloomops.execution.policy import retry_waiting
from bloomops.execution.states import WorkerStatus, WorkerType
from bloomops.web import services
from bloomops.web.bulk import BULK_ACTIONS, UNREADABLE_PICK, picks_from
from bloomops.web.offers import (
    mark_rejections,
    releases_asked,
    requests_waiting,
    requeues_asked,
    subject_states,
    worker_operations,
)
from bloomops.web.views.common import (
    answer,
    answer_bulk,
    back_url,
    guards,
    known_filter,
    reader,
    reason_of,
)

# How many of a worker's items the workers page names (the rest are counted).
WORKING_SHOWN = 5


@require_GET
@reader
def worker_dashboard(request: HttpRequest) -> HttpResponse:
    """Workers with what each is working on; filtered by status, type and text (name, key,
    capability) over the rows already read, and by queue: who holds leases in it, and those
    leases only (the items behind the dashboard's "leased" count)."""
    notes: list[str] = []
    statuses, types = [s.value for s in WorkerStatus], [t.value for t in WorkerType]
    status = known_filter(notes, "worker status", request.GET.get("status", "").strip().upper(),
                          statuses, "every status is shown") or ""
    kind = known_filter(notes, "worker type", request.GET.get("type", "").strip().upper(),
                        types, "every type is shown") or ""
    text = request.GET.get("q", "").strip().lower()
    queue_key = known_filter(notes, "queue", request.GET.get("queue", "").strip(),
                             (q["queue_key"] for q in selectors.queues()),
                             "every worker is shown") or ""
    rows = selectors.workers()
    holding: dict[str, list[dict]] = {}
    # each worker's newest few (the lab's newest 500 had left most workers "working on
    # nothing" at scale); the count beside them is every lease the worker holds
    for lease in selectors.leases(status="ACTIVE", queue_key=queue_key or None,
                                  per_worker=WORKING_SHOWN, limit=WORKING_SHOWN * len(rows)):
        holding.setdefault(lease["worker_euid"], []).append(lease)
    shown = [w for w in rows
             if (not queue_key or w.euid in holding)
             and (not status or w.computed_status == status)
             and (not kind or w.props.get("worker_type") == kind)
             and (not text or text in " ".join(str(v) for v in (
                 w.euid, w.worker_key, w.props.get("display_name"),
                 *(w.props.get("capabilities") or []))).lower())]
    # the retired last: out of service for good, they sat among the online ones by key
    shown.sort(key=lambda w: w.computed_status == WorkerStatus.RETIRED)
    # a service worker registered past what its account's profile allows now: its claims are
    # refused until it registers again within it (RULES.md#service-workers)
    outside = people.outside_profiles(shown)
    return render(request, "web/workers.html", {
        "workers": [(w, worker_operations(w.props), held,
                     0 if queue_key else max(0, w.active_leases - len(held)),
                     outside.get(w.euid))
                    for w in shown for held in [holding.get(w.euid, [])]],
        "total": len(rows), "statuses": statuses, "types": types, "notes": notes,
        "filters": {"status": status, "type": kind, "q": request.GET.get("q", ""),
                    "queue": queue_key},
    })


@require_POST
def worker_status(request: HttpRequest, worker_euid: str) -> HttpResponse:
    operation = request.POST.get("operation", "")

    def run() -> ActionResult:
        payload = {"operation": operation}
        if reason_of(request):
            payload["reason"] = reason_of(request)
        return services.perform(request.user, "set_worker_status", worker_euid=worker_euid,
                                payload=payload,
                                idempotency_key=guards(request)["idempotency_key"])

    def said(result: ActionResult) -> str:
        found = selectors.workers(euid=worker_euid)
        name = (found[0].props.get("display_name") if found else None) or worker_euid
        status = str(result["status"])
        return f"{name} ({worker_euid}) is now {status.lower()}: {STATUS_WORDS.get(status, '')}"

    return answer(request, run, said, reverse("workers"))


# What a worker's new status means, said after an admin changes it.
STATUS_WORDS = {
    "DRAINING": "it finishes what it holds and takes no new work.",
    "DISABLED": "it takes no new work and cannot renew or finish what it holds.",
    "RETIRED": "it is out of service for good.",
    "ONLINE": "it takes work again.",
}


# The newest of each list the workbench shows: a page of thousands of rows took a tablet
# ten seconds to lay out; the rest are found by searching or on Failures and Holds.
WORKBENCH_ROWS = 200


@require_GET
@reader
def workbench(request: HttpRequest) -> HttpResponse:
    notes: list[str] = []
    # a stale bookmark's queue showed every list empty, as if the desk were clear
    queue_key = known_filter(notes, "queue", request.GET.get("queue", "").strip(),
                             (q["queue_key"] for q in services.queues(request)),
                             "the whole desk is shown")
    # searched in SQL, before each list's limit: at lab scale the limit cut off most of them
    text = request.GET.get("q", "").strip() or None
    shown = {"queue_key": queue_key, "text": text, "limit": WORKBENCH_ROWS, "counted": True}
    dead = selectors.dead_letters(**shown)
    holds = [{**h, "gated": hold_gates(h["props"].get("hold_code"))}
             for h in selectors.active_holds(**shown)]
    retrying = selectors.failures(kind="retrying", **shown)
    overdue_only = request.GET.get("overdue") == "1"
    outside = selectors.outside_work(overdue_only=overdue_only, **shown)
    requeue_gate = dead_letter_gate()
    # what is asked already, waiting for a second person (the waiting approvals only: the
    # decided ones pile up for years): requeues by subject, releases by hold
    waiting = requests_waiting() if (requeue_gate and dead) or any(
        h["gated"] for h in holds) else []
    held_asked = releases_asked(waiting)
    # cancelling is gated by any integrity hold of the subject, not by this row's own code
    cancel_gated = {h["subject_euid"] for h in holds
                    if "cancel_subject_execution" in h["gated"]}
    for h in holds:
        h["asked"] = h["euid"] in held_asked
        h["cancel_gated"] = h["subject_euid"] in cancel_gated
    mark_rejections(holds, dead, requeue_gate)
    return render(request, "web/workbench.html", {
        # each list's newest, and how many there are in all
        "totals": {"dead": selectors.total_of(dead), "holds": selectors.total_of(holds),
                   "retrying": selectors.total_of(retrying),
                   "outside": selectors.total_of(outside)},
        "dead_letters": dead,
        # requeueing a dead letter needs a second person: each row asks for one instead
        "requeue_gate": requeue_gate,
        "requeue_asked": requeues_asked(waiting),
        "holds": holds,
        # the dashboard counts held items, this list holds: an item may have two
        "held_items": len({h["subject_euid"] for h in holds}),
        "names": hold_people(holds),
        "retrying": retrying,
        # the dashboard's "retry pending" counts those still waiting for their time; the
        # rest of these may be claimed now
        "retrying_due": sum(1 for r in retrying if not retry_waiting(
            {"retry_at": r.get("retry_at")}, ts(clock.now()))),
        "outside": outside,
        "overdue_only": overdue_only,
        "overdue_total": outside[0]["overdue_total"] if outside else 0,
        "hold_codes": hold_codes(),
        # a bulk hold's confirmation names the codes whose release needs a second person
        "gated_codes": [c for c in hold_codes() if "release_execution_hold" in hold_gates(c)],
        "can": subject_states(),
        "queues": services.queues(request),
        "queue_key": queue_key or "",
        "notes": notes,
        "q": request.GET.get("q", ""),
    })


@require_POST
def workbench_bulk(request: HttpRequest) -> HttpResponse:
    verb = request.POST.get("action", "")
    default = reverse("workbench")
    if verb not in BULK_ACTIONS:
        messages.error(request, "Choose requeue, release, hold or cancel.")
        return redirect(back_url(request, default))
    try:
        picks = picks_from(request.POST.getlist("pick"))
    except ValueError:
        messages.error(request, UNREADABLE_PICK)
        return redirect(back_url(request, default))
    if not picks:
        messages.error(request, "Select at least one item.")
        return redirect(back_url(request, default))
    return answer_bulk(request, verb, picks, reason=reason_of(request),
                       back=back_url(request, default))


@require_GET
@reader
def admin_tools(request: HttpRequest) -> HttpResponse:
    # narrowed by queue or worker: at scale the newest 500 of 8,180 left the rest out of reach
    queue_key = request.GET.get("queue", "").strip() or None
    # an EUID as typed or copied from a page: TapDB's are upper case
    worker = request.GET.get("worker", "").strip().upper() or None
    active = selectors.leases(status="ACTIVE", queue_key=queue_key, worker_euid=worker,
                              counted=True)
    expired = selectors.leases(unswept=True, queue_key=queue_key, worker_euid=worker,
                               counted=True)
    return render(request, "web/admin_tools.html", {
        "active": active, "expired": expired,
        "totals": {"active": selectors.total_of(active),
                   "expired": selectors.total_of(expired)},
        "queues": services.queues(request), "filters": {"queue": queue_key or "",
                                                  "worker": worker or ""},
    })


@require_POST
def expire_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    def run() -> ActionResult:
        payload = {"reason": reason_of(request)} if reason_of(request) else {}
        return services.perform(request.user, "expire_queue_lease", lease_euid=lease_euid,
                                payload=payload,
                                idempotency_key=guards(request)["idempotency_key"])

    def text(r: ActionResult) -> str:
        if r.get("noop"):
            return f"Lease {lease_euid} was no longer active; nothing to expire."
        return f"Lease {lease_euid} expired; its subject is back in its queue."

    return answer(request, run, text, reverse("admin_tools"))


@require_POST
def sweep(request: HttpRequest) -> HttpResponse:
    def run() -> ActionResult:
        return services.perform(request.user, "expire_queue_lease",
                                idempotency_key=guards(request)["idempotency_key"])

    def text(r: ActionResult) -> str:
        n = r.get("expired_count") or 0
        return f"Sweeper expired {n} lease(s)." if n else "Nothing to sweep: no expired leases."

    return answer(request, run, text, reverse("admin_tools"))
