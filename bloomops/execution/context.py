"""What every action shares: who acts (Actor), what is asked (ActionRequest), what it
answered (ActionResult), what the action template allows (ActionSpec) and what a handler
sees and fills in (Context)."""


from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.accounts.roles import roles_of
from bloomops.accounts.signatures import person_name
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import REL, Obj
from bloomops.execution.states import ALL_STATES
from bloomops.tapdb.instances import Created, create_instance, link, link_many
from bloomops.tapdb.templates import all_templates, pack_action_definitions, template

ACTION_CODE = "action/execution_queue/{key}/1.0"
EVENT_CODE = "message/execution/event/1.0"
# Heartbeats are liveness, not domain events: recorded as actions, not emitted.
NOT_EMITTED = frozenset({"heartbeat_worker"})

@dataclass
class Actor:
    username: str
    roles: frozenset[str]
    # the person's name as it reads when they act: a record keeps it, so a later rename does
    # not rewrite who did what (empty for a process: its username says it)
    name: str = ""

    @classmethod
    def of(cls, user) -> Actor:
        return cls(username=user.get_username(), roles=roles_of(user), name=person_name(user))

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


# The request envelope (RULES.md#requests): what every action request may name besides its
# idempotency key and payload. The API schema, the guards and the hash all read this list.
ENVELOPE_FIELDS = ("subject_euid", "worker_euid", "lease_euid", "hold_euid", "queue_key",
                   "expected_state", "expected_revision")
# Queue settings whose null is a value, not an omission: it clears the setting (no scope, no
# capability asked, no default next queue or step, no limit on the flow), where every other
# null is the field left out. Held to actions/queue_fields.py by tests/test_queue_config.py.
NULL_CLEARS = frozenset({"required_worker_capabilities", "site_scope", "platform_scope",
                         "assay_scope", "output_template_codes", "default_next_queue_key",
                         "default_next_action_key", "next_queue_keys"})


@dataclass
class ActionRequest:
    action_key: str
    actor: Actor
    idempotency_key: str
    subject_euid: str | None = None
    worker_euid: str | None = None
    lease_euid: str | None = None
    hold_euid: str | None = None
    queue_key: str | None = None
    expected_state: str | None = None
    expected_revision: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    tenant: str | None = None
    now: datetime | None = None
    # The electronic signature of an approval decision (the signer's password re-entered)
    # and the HTTP request it came with (sign-in throttling counts failures by its address).
    # Neither is hashed, stored, logged or replayed (RULES.md#approvals).
    signature_password: str | None = field(default=None, repr=False, compare=False)
    origin: Any = field(default=None, repr=False, compare=False)

    def hash_material(self) -> dict[str, Any]:
        # a payload field sent as null is the field left out (docs/API.md), so the two are
        # one request, not a conflict; except where null is a value (NULL_CLEARS)
        return {"action_key": self.action_key,
                **{name: getattr(self, name) for name in ENVELOPE_FIELDS},
                "payload": {k: v for k, v in self.payload.items()
                            if v is not None or k in NULL_CLEARS}}

    def payload_hash(self) -> str:
        material = json.dumps(self.hash_material(), sort_keys=True, separators=(",", ":"),
                              default=str)
        return hashlib.sha256(material.encode()).hexdigest()


@dataclass
class ActionResult:
    action_key: str
    action_euid: str | None
    replayed: bool
    result: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.result[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.result.get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return {
            "action_key": self.action_key,
            "action_euid": self.action_euid,
            "replayed": self.replayed,
            **self.result,
        }


@dataclass
class ActionSpec:
    key: str
    name: str
    allowed_roles: frozenset[str]
    requires_lease: bool
    allowed_from_states: tuple[str, ...] | None

    @property
    def runs_from(self) -> tuple[str, ...]:
        """The subject states the action runs from (RULES.md#holds): those its template lists,
        else every state; HELD only where the list names it (a held subject is released, or
        canceled, first)."""
        if self.allowed_from_states is not None:
            return self.allowed_from_states
        return tuple(s for s in ALL_STATES if s != "HELD")


def action_spec(action_key: str) -> ActionSpec:
    """What bloomops allows of an action (its own pack's policy), provided a template for its
    action records exists in the database (ours, or another writer's with the same code)."""
    ref = all_templates().get(ACTION_CODE.format(key=action_key))
    definition = pack_action_definitions().get(action_key)
    if ref is None or definition is None:
        raise ActionError("VALIDATION_ERROR", f"Unknown action {action_key!r}.",
                          field="action_key")
    states = definition.get("allowed_from_states")
    return ActionSpec(
        key=action_key,
        name=definition.get("action_name", action_key),
        allowed_roles=frozenset(definition.get("allowed_roles") or ()),
        requires_lease=bool(definition.get("requires_lease")),
        allowed_from_states=tuple(states) if states is not None else None,
    )


def action_name(action_key: str) -> str | None:
    """What was done, in the words of the action's definition ("Place hold"); None for an
    action bloomops does not know (another writer's)."""
    try:
        return action_spec(action_key).name
    except ActionError:
        return None


def ensure_role(roles: frozenset[str], spec: ActionSpec) -> None:
    """RULES.md#roles: the caller needs one of the roles the action allows."""
    if not (roles & spec.allowed_roles):
        raise ActionError("FORBIDDEN", f"Your role may not {spec.name.lower()}.",
                          action_key=spec.key, allowed_roles=sorted(spec.allowed_roles))


@dataclass
class Context:
    """What a handler sees and fills in."""

    request: ActionRequest
    spec: ActionSpec
    actor: Actor
    now: datetime
    tenant: str
    subject: Obj | None = None
    env: dict[str, Any] | None = None
    worker: Obj | None = None
    lease: Obj | None = None
    env_changed: bool = False
    target: Obj | None = None
    result: dict[str, Any] = field(default_factory=dict)
    emit: bool = True
    # Set by a handler that found nothing to do (e.g. a second sweep): nothing is written.
    noop: bool = False
    # Objects the action also acted on besides its target (the subjects of force-expired
    # leases): each gets an executed_on edge, so the action is in their history.
    related_uids: list[int] = field(default_factory=list)
    # An approved gated action the executor runs after this handler, in the same
    # transaction (RULES.md#approvals): its request and the approval it runs under.
    follow_up: tuple[ActionRequest, dict[str, Any]] | None = None
    # The queue the action sends its subject to, when the handler's check found it (run
    # uses it rather than reading it again).
    next_queue: dict[str, Any] | None = None
    # The subject an action that does not load its own (a renewal) found and locked through
    # its lease: the lease checks compare it rather than finding it again.
    leased_subject: Obj | None = None

    @property
    def payload(self) -> dict[str, Any]:
        return self.request.payload

    @property
    def now_ts(self) -> str:
        return ts(self.now)  # type: ignore[return-value]

    def set_env(self, **changes: Any) -> None:
        assert self.env is not None
        self.env.update(changes)
        self.env_changed = True

    def create(self, code: str, *, name: str, properties: dict[str, Any]) -> Obj:
        created = create_instance(code, name=name, properties=properties, tenant_id=self.tenant)
        return created_obj(code, created)

    def link(self, parent: Obj, child: Obj, rel_name: str) -> None:
        link(parent.uid, child.uid, REL[rel_name], tenant_id=self.tenant)

    def link_many(self, edges: list[tuple[Obj, Obj, str]]) -> None:
        link_many([(p.uid, c.uid, REL[r]) for p, c, r in edges], tenant_id=self.tenant)


def created_obj(code: str, created: Created) -> Obj:
    """The object just inserted, from what the INSERT returned (no second read)."""
    ref = template(code)
    return Obj(uid=created.uid, euid=created.euid, name=created.name, template_uid=ref.uid,
               type=ref.type, subtype=ref.subtype, json_addl=created.json_addl,
               created_dt=created.created_dt)
