"""Every action's request schema, by the key of the engine's action registry: the core
actions' (``action_schemas``), the workers' (``worker_schemas``), the queue
configuration's (``queue_schemas``) and the approvals' (``approval_schemas``). Apart from
them, since those build on action_schemas."""

from bloomops.api.action_schemas import CORE_SCHEMAS, ActionEnvelope
from bloomops.api.approval_schemas import APPROVAL_SCHEMAS
from bloomops.api.queue_schemas import QUEUE_SCHEMAS
from bloomops.api.worker_schemas import WORKER_SCHEMAS
from bloomops.execution.actions import HANDLERS

REQUEST_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    **CORE_SCHEMAS, **WORKER_SCHEMAS, **QUEUE_SCHEMAS, **APPROVAL_SCHEMAS}

# The document leaves out what each action refuses (one schema class per action).
for _key, _schema in REQUEST_SCHEMAS.items():
    _schema.not_applicable = HANDLERS[_key].not_applicable
