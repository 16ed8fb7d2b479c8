"""The bench: scan to claim (a loop that keeps the field ready) and My work (renew,
release, complete, fail)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.roles import roles_of
from bloomops.execution import clock, selectors
from bloomops.execution.actions.fields import NAME_MAX
from bloomops.execution.envelope import parse_ts_or_none, ts
from bloomops.execution.errors import CLAIM_GONE_CODES, ActionError, Problems
from bloomops.execution.executor import ActionResult
from bloomops.execution.selectors import bench as bench_selectors
from bloomops.text import readable_line
from bloomops.web import bench_words, services
from bloomops.web.bench_items import (
    bench_order,
    result_of_form,
    seconds_left,
    work_item,
)
from bloomops.web.drafts import FINISHED
from bloomops.web.templatetags.bloomops_ui import wall_clock
from bloomops.web.timewords import readable_seconds
from bloomops.web.views.common import (
    answer,
    as_human,
    back_url,
    forbidden,
    guards,
    reader,
    reason_of,
)

SCAN_CLAIMED = "bloomops_scan_claimed"  # session key: the last claim, shown once after PRG
EUID_MAX_LENGTH = 64


def _scan_claimed(result: ActionResult) -> dict:
    """What a success banner needs from a claim (or its replay), JSON-serialisable for the
    session of the no-JavaScript redirect."""
    return {"subject_euid": result["subject_euid"], "queue_key": result["queue_key"],
            "lease_euid": result["lease_euid"], "expires_at": result["expires_at"],
            "replayed": result.replayed}


def _scan_banner(claimed: dict) -> dict:
    """The claimed subject's name and the queue's display name, read now: the result stores
    EUIDs and keys only."""
    queue = selectors.queue_config(claimed["queue_key"])
    return {**claimed, "subject_name": selectors.subject_name(claimed["subject_euid"]) or "",
            "queue_name": (queue["config"].get("display_name") if queue else None)
            or claimed["queue_key"]}


def _scan_page(request: HttpRequest, context: dict, status: int = 200) -> HttpResponse:
    """The whole page, or (htmx) only the outcome plus a fresh form guard: the field itself
    is never swapped, so keystrokes of the next scan typed meanwhile are kept."""
    if request.htmx:
        return render(request, "web/_scan_outcome.html", context, status=status)
    # The list of this sign-in's scans outlives a reload (kept in the tab under this key):
    # a session's own, so the next person signed in on the tablet starts with none.
    session = request.session.session_key or ""
    context["log_key"] = salted_hmac("bloomops.scan-log", session).hexdigest()[:20]
    return render(request, "web/scan.html", context, status=status)


def _scan_refusal(request: HttpRequest, euid: str, err: ActionError,
                  diagnose: bool = False) -> HttpResponse:
    context = {"euid": euid, "error": bench_words.bench_refusal(err.code, err.message, err.details)}
    if diagnose:
        mine = services.my_worker_euid(request.user)
        diag = selectors.subject_diagnostics(euid, worker_euid=mine)
        context["diagnostics"] = diag
        if diag is not None:
            lease = diag.active_lease or {}
            holder = (lease.get("props") or {}).get("worker_lookup_euid")
            context["reasons"] = bench_words.scan_reasons(diag, mine)
            if err.code == "NOT_VISIBLE" and context["reasons"]:
                # The engine's message repeats the reasons with EUIDs and raw times.
                context["error"] = "It is not available to claim right now:"
            elif err.code == "MAX_LEASES_REACHED" and context["reasons"]:
                # the item's own reason first: releasing work for an item that could not be
                # claimed anyway (finished, held) would be for nothing
                context["error"] = ("It is not available to claim right now (and you hold as"
                                    " many items as you may):")
            if holder and holder == mine:  # first: whatever else the refusal said
                context["my_lease"] = lease.get("euid")
                context["error"] = "Act on it in My work, or scan the next item."
    return _scan_page(request, context, status=err.http_status)


@reader
def scan(request: HttpRequest) -> HttpResponse:
    """Scan to claim, a loop: every outcome comes back on /scan/ with an empty, focused field
    and a fresh idempotency key. Without JavaScript a success redirects back here (so a reload
    never re-posts); with htmx only the outcome is swapped in."""
    if request.method != "POST":
        claimed = request.session.pop(SCAN_CLAIMED, None)
        return _scan_page(request, {"claimed": _scan_banner(claimed) if claimed else None})
    label = request.POST.get("euid", "").strip()
    if not label:
        return _scan_refusal(request, label, ActionError("VALIDATION_ERROR",
                                                         "Scan or type an EUID or a name."))
    if len(label) > NAME_MAX or not label.isprintable():
        shown = "".join(c for c in label if c.isprintable())[:EUID_MAX_LENGTH]
        return _scan_refusal(request, shown, ActionError(
            "VALIDATION_ERROR", "That is not an EUID or a name; scan the label again."))
    # Our EUID, or the lab's own name on the tube: claimed only when it means one subject.
    meant = selectors.open_one(selectors.subjects_labelled(label))
    euid = meant[0]["euid"] if len(meant) == 1 else label
    try:
        if len(meant) > 1:
            raise ActionError("VALIDATION_ERROR", f"{len(meant)} subjects go by"
                              f" \u201c{label}\u201d: "
                              + "; ".join(bench_words.told_apart(m) for m in meant[:5])
                              + f"{' …' if len(meant) > 5 else ''}. Scan the EUID of the one"
                              " you hold, and tell QA: one name on two subjects is put right"
                              " where they were registered, not here.")
        if not meant:  # said before anything about the person's own limits
            raise ActionError("NOT_FOUND", "No subject has this EUID or name.")
        result = as_human(request, "claim_queue_item", subject_euid=euid,
                          idempotency_key=guards(request)["idempotency_key"])
    except ActionError as err:
        if err.code == "FORBIDDEN" and not request.htmx:
            return forbidden(request, err.message)
        # the headline names the subject meant, or the label as it was scanned
        return _scan_refusal(request, euid if len(meant) == 1 else label, err,
                             diagnose=err.code != "FORBIDDEN" and len(meant) == 1)
    if request.htmx:
        return _scan_page(request, {"claimed": _scan_banner(_scan_claimed(result))})
    request.session[SCAN_CLAIMED] = _scan_claimed(result)
    return redirect("scan")


@require_GET
@reader
def my_work(request: HttpRequest) -> HttpResponse:
    """My leases (or, with ?item=LEASE, the one item just claimed: its work view), and what
    happened to the ones that ended without me."""
    worker_euid = services.my_worker_euid(request.user)
    now = clock.now()
    if request.GET.get("part") == "held":
        # the page's own poll: which of its claims still hold and how long each has left
        # (static/js/bloomops.js marks the others ended and sets each countdown again: a
        # claim renewed on another device read "ran out" while it held)
        held = selectors.leases(status="ACTIVE", worker_euid=worker_euid, now=now) \
            if worker_euid else []
        return JsonResponse({"held": [x["euid"] for x in held],
                             "left": {x["euid"]: seconds_left(x, now) for x in held}})
    if request.GET.get("part") == "why":
        # a card the poll found ended says why where it is, without a reload
        lease = request.GET.get("lease", "").strip()[:EUID_MAX_LENGTH]
        username = request.user.get_username()
        found = next((n for r in (bench_selectors.lost_leases(worker_euid) if worker_euid
                                  else []) if r["euid"] == lease
                      for n in [bench_words.lost_notice(r, username)] if n), None)
        return JsonResponse({"said": bench_words.lost_clause(found) if found else None,
                             "why": found.get("why") if found else None})
    queues = {q["queue_key"]: q for q in selectors.queues()}
    items = bench_order([work_item(x, queues, now) for x in selectors.leases(
        status="ACTIVE", worker_euid=worker_euid, now=now, oldest_first=True)]) \
        if worker_euid else []
    focus = request.GET.get("item", "").strip()[:EUID_MAX_LENGTH]
    focused = [i for i in items if i["euid"] == focus]
    username = request.user.get_username()
    held_again = {i["subject_euid"] for i in items}  # claimed back since: old news
    lost = [n for n in (bench_words.lost_notice(r, username)
                        for r in bench_selectors.lost_leases(worker_euid)
                        if r["subject_euid"] not in held_again) if n] \
        if worker_euid else []
    # each item once (its latest ending), none the person has cleared the list of: a day of
    # endings pushed the item just claimed below a phone's fold
    cleared = request.session.get(LOST_SEEN, "")
    listed: list[dict] = []
    for n in lost:  # newest first
        if (str(n["when"] or "") > cleared
                and all(m["row"]["subject_euid"] != n["row"]["subject_euid"] for m in listed)):
            listed.append(n)
    standing = bench_words.standing_notice(
        bench_selectors.worker_standing(worker_euid) if worker_euid else None)
    lost_focus = bool(focus) and any(n["row"]["euid"] == focus for n in lost)
    # An item's work view whose claim ended (Back after completing it, a bookmark) shows no
    # other item in its place: a tap meant for the one gone would land on the next's button.
    gone = bool(focus) and not focused and not lost_focus
    return render(request, "web/my_work.html", {
        "worker_euid": worker_euid,
        "items": [] if gone else focused or items,
        "gone": gone,
        "still_held": len(items),
        # every claim the person holds, whichever one is shown: results typed for a claim
        # not among them are given up by the tab (bloomops.js); kept until then, a form lost
        # to the network or a sign-in is filled again
        "held_leases": ",".join(i["euid"] for i in items),
        "focused": bool(focused),
        "others": len(items) - len(focused) if focused else 0,
        "lost_focus": lost_focus,
        "lost": listed[:LOST_SHOWN] if not focus else [n for n in lost
                                                        if n["row"]["euid"] == focus],
        "lost_more": max(0, len(listed) - LOST_SHOWN) if not focus else 0,
        "standing": standing,
        "retry_choices": bench_words.retry_choices(roles_of(request.user)),
        "refresh_seconds": settings.BLOOMOPS_MY_WORK_REFRESH_SECONDS,
        "choose": CHOOSE, "finished": FINISHED,
    })


# My work lists this many claims that ended without the person, the newest first.
LOST_SHOWN = 5
# When the person last cleared that list (session key).
LOST_SEEN = "bench_lost_seen_at"


def bench_answer(request: HttpRequest, run: Callable[[], ActionResult],
                 success: Callable[[ActionResult], str], default: str,
                 goto: Callable[[ActionResult], str] | None = None,
                 refused_to: str | None = None, typed: str = "") -> HttpResponse:
    """``answer`` with refusals in the bench's words (bench_words.BENCH_REFUSALS); where the
    claim is gone, with the results ``typed`` for it (its card, where they would come back,
    is gone too: a force-expired claim's measurements were lost unseen)."""
    def worded() -> ActionResult:
        try:
            return run()
        except ActionError as err:
            words = bench_words.bench_refusal(err.code, err.message, err.details)
            if typed and err.code in CLAIM_GONE_CODES:
                words += f" What you typed was not recorded: {typed}."
            if words == err.message:
                raise
            raise ActionError(err.code, words, **err.details) from None

    return answer(request, worded, success, default, goto, refused_to)


def work_view_url(result: ActionResult) -> str:
    return item_view(result["lease_euid"])


def item_view(lease_euid: str) -> str:
    """My work showing one claim. A refused action on it lands there, not on the list where
    the refusal's banner sits far from the item (or says what became of a claim gone)."""
    return f"{reverse('my_work')}?{urlencode({'item': lease_euid})}"


def _lease_action(request: HttpRequest, lease_euid: str, action_key: str, payload: dict,
                  success: Callable[[ActionResult], str], *, ends: bool = True,
                  typed: str = "") -> HttpResponse:
    """An action on one of my leases; one that ends it lands on My work (its work view would
    be empty), a renewal back where the person was."""
    def run() -> ActionResult:
        g = guards(request)
        return as_human(request, action_key, lease_euid=lease_euid, payload=payload, **g)

    # a renewal comes back to its card (re-sorted, under a banner: it was a tablet's screen
    # and more below where the page opened)
    return bench_answer(request, run, success, reverse("my_work"),
                        (lambda r: reverse("my_work")) if ends else
                        (lambda r: f"{back_url(request, reverse('my_work'))}#item-{lease_euid}"),
                        item_view(lease_euid), typed=typed)


def _until(expires_at: str | None) -> str:
    moment = parse_ts_or_none(expires_at)
    if moment is None:
        return ""
    # rounded, not cut: a 10-minute claim renewed a moment ago is "another 10 min" (9 min 59 s)
    left = max(0.0, (moment - clock.now()).total_seconds())
    left = round(left / 60) * 60 if left >= 60 else round(left)
    return format_html("{}, until {}", readable_seconds(left), wall_clock(moment))


@require_POST
def renew_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    return _lease_action(request, lease_euid, "renew_queue_lease", {},
                         lambda r: format_html("Renewed: {} is yours for another {}.",
                                               services.item_called(r),
                                               _until(r["expires_at"])), ends=False)


@require_POST
def lost_seen(request: HttpRequest) -> HttpResponse:
    """Clear My work's list of claims that ended without the person: the endings until now
    are not listed again (the session remembers when)."""
    request.session[LOST_SEEN] = ts(clock.now())
    return redirect("my_work")


@require_POST
def renew_all(request: HttpRequest) -> HttpResponse:
    """Every claim of mine renewed in one tap (a short QC claim and a long one at once):
    each is its own action; one refused (ended meanwhile) is said, the others go on."""
    worker = services.my_worker_euid(request.user)
    key = guards(request)["idempotency_key"]
    renewed, refused = 0, []
    for lease in selectors.leases(status="ACTIVE", worker_euid=worker) if worker else []:
        try:
            as_human(request, "renew_queue_lease", lease_euid=lease["euid"],
                     idempotency_key=f"{key}:{lease['euid']}" if key else "")
            renewed += 1
        except ActionError as err:
            refused.append(f"{lease['subject_name'] or lease['subject_euid']}:"
                           f" {bench_words.bench_refusal(err.code, err.message, err.details)}")
    if renewed:
        messages.success(request, f"Renewed {renewed} item{'s' if renewed != 1 else ''}.")
    for text in refused:
        messages.error(request, f"Not renewed, {text}")
    if not renewed and not refused:
        messages.info(request, "You hold nothing to renew.")
    return redirect("my_work")


@require_POST
def release_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    payload = {"reason": reason_of(request)} if reason_of(request) else {}
    return _lease_action(request, lease_euid, "release_queue_lease", payload,
                         lambda r: f"Released {services.item_called(r)} back to its queue.")


@require_POST
def complete_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    choice = request.POST.get("next_queue_key", "").strip()
    if choice == CHOOSE:
        return answer(request, partial(_refuse_no_choice, request.POST, lease_euid),
                      lambda r: "", reverse("my_work"), refused_to=item_view(lease_euid))
    try:
        result, recorded = result_of_form(request.POST, lease_euid)
    except ActionError as unclear:  # a number it will not guess: back to the card, as typed
        return answer(request, partial(_refuse, unclear), lambda r: "", reverse("my_work"),
                      refused_to=item_view(lease_euid))
    typed = recorded.removeprefix(" (recorded ").removesuffix(")")
    made = services.parse_make_choice(choice)
    if made is not None:
        def run() -> ActionResult:
            payload = services.made_for_next_queue(request.user, lease_euid, *made)
            if result:
                payload["result_snapshot"] = result
            return as_human(request, "complete_queue_execution", lease_euid=lease_euid,
                            payload=payload, **guards(request))

        words = bench_words.template_words(made[1])
        return bench_answer(
            request, run, lambda r: format_html(
                "Completed {}{}: made {} ({}) for {}.", services.item_link(r), recorded,
                services.subject_links(r["output_euids"]),
                words, services.queue_said(made[0])),
            reverse("my_work"), lambda r: reverse("my_work"), item_view(lease_euid),
            typed=typed)
    payload: dict = {"next_queue_key": choice} if choice else {}
    if result:
        payload["result_snapshot"] = result
    return _lease_action(
        request, lease_euid, "complete_queue_execution", payload,
        lambda r: format_html("Completed {}{}{}", services.item_link(r), recorded,
                              f"; it moved to {services.queue_said(choice)}." if choice
                              else "; its flow is finished."), typed=typed)


@require_POST
def fail_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    payload = {"error_class": request.POST.get("error_class", "").strip() or None,
               "error_message": request.POST.get("error_message", "").strip() or None}
    if not readable_line(payload["error_message"] or ""):  # nothing a reader would see
        # A person's failure is read by the next person and by QA: it says what went wrong,
        # whatever its class (the engine asks it only of a failure that ends or holds the
        # item, attempts.require_why: a service's transient one may come bare).
        return answer(request, _refuse_blank_failure, lambda r: "", reverse("my_work"),
                      refused_to=item_view(lease_euid))
    if not payload["error_class"]:
        # the form offers no kind until one is chosen: "try again later", first in the list,
        # sent a cracked tube back to be tried again under a hurried Yes
        return answer(request, _refuse_no_kind, lambda r: "", reverse("my_work"),
                      refused_to=item_view(lease_euid))
    return _lease_action(
        request, lease_euid, "fail_queue_execution", {k: v for k, v in payload.items() if v},
        lambda r: f"Recorded the failure of {services.item_called(r)}:"
                  f" {bench_words.state_words(r['state'])}.")


# The Next queue list's first option when the person must choose (no default to go to).
CHOOSE = "-choose"  # no queue key starts with "-" (queue_fields.QUEUE_KEY_PATTERN)


def _refuse(err: ActionError) -> ActionResult:
    raise err


def _refuse_no_choice(post, lease_euid: str) -> ActionResult:
    """Nothing is sent: what the results typed would be refused for is said too, so that
    one answer asks for every correction (the choice, then a number out of range was two)."""
    problems = Problems()
    with problems.field():  # the results first, in the card's order: the list is below them
        result_of_form(post, lease_euid, checked=True)
    with problems.field():
        raise ActionError("VALIDATION_ERROR", "Choose where the item goes next (or finish its"
                          " flow) before completing it.", field="next_queue_key")
    problems.raise_any()
    raise AssertionError("unreachable: the choice is always missing here")


def _refuse_no_kind() -> ActionResult:
    raise ActionError("VALIDATION_ERROR", "Choose what kind of failure it was: whether the"
                      " item is tried again depends on it.", field="error_class")


def _refuse_blank_failure() -> ActionResult:
    raise ActionError("VALIDATION_ERROR", "Say what went wrong: the failure is recorded with"
                      " your words for whoever picks the item up next.", field="error_message")
