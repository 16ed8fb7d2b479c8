"""The handler protocol: validate (request shape, no database), prepare (load and lock, in
the order subject -> worker -> lease), run (envelope change, new objects, lineage, result).
Guards common to all actions live in the executor."""

from __future__ import annotations

from bloomops.execution.actions.fields import (
    common_checks,
)
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.guards import lock_subject


class Handler:
    guards_subject = True
    # The payload fields this action takes; any other key is refused (RULES.md#requests).
    fields: tuple[str, ...] = ()
    # Request fields that are not payload: passed to the executor beside it, never hashed or
    # stored (an e-signature's password, RULES.md#approvals).
    secret_fields: tuple[str, ...] = ()
    # May run on a subject whose stored envelope is broken, rebuilding it (the operator's
    # way out); every other action refuses such a subject with INVALID_ENVELOPE.
    repairs_envelope = False
    # Makes, changes or retires a queue: the statistics snapshot is marked stale in the same
    # transaction, so every reader computes live until the recorder's next pass.
    changes_queues = False
    # Request envelope fields this action has nothing to apply to (it makes its subject or
    # acts on a worker alone): refused when sent, as a guard that would silently not guard.
    not_applicable: tuple[str, ...] = ()

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)

    def prepare(self, ctx: Context) -> None:
        lock_subject(ctx, ctx.request.subject_euid)

    def check(self, ctx: Context) -> None:
        """Refusals that depend on the subject as it stands, made before the approval gate
        and when a second person's approval is requested (RULES.md#approvals), so that no
        one is asked to approve what would then be refused."""

    def run(self, ctx: Context) -> None:  # pragma: no cover - every handler overrides
        raise NotImplementedError
