"""The handler protocol: validate (request shape, no database), prepare (load and lock, in
the order subject -> worker -> lease), run (envelope change, new objects, lineage, result).
Guards common to all actions live in the executor."""

from __future__ import annotations

from bloomops.execution.actions.fields import (
    common_checks,
)
from bloomops.execution.context import ENVELOPE_FIELDS, ActionRequest, Context
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
    # Changes what the recorded statistics show beyond the counts (a queue made, changed or
    # retired; a worker drained, disabled, enabled or retired: the coverage figures): the
    # snapshot is marked stale in the same transaction, so every reader computes live until
    # the recorder's next pass.
    changes_statistics = False
    # The request envelope fields (context.ENVELOPE_FIELDS) this action reads and checks.
    # Any other one sent is refused (``not_applicable``): a guard that would silently not
    # guard. tests/test_action_fields.py sends each of them wrong to every action.
    uses: frozenset[str] = frozenset()

    @property
    def not_applicable(self) -> tuple[str, ...]:
        return tuple(name for name in ENVELOPE_FIELDS if name not in self.uses)

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
