"""Every action's request schema, by the key of the engine's action registry: the core
actions' (``action_schemas``), the queue configuration's (``queue_schemas``) and the
approvals' (``approval_schemas``). Apart from them, since those build on action_schemas."""

from bloomops.api.action_schemas import CORE_SCHEMAS, ActionEnvelope
from bloomops.api.approval_schemas import APPROVAL_SCHEMAS
from bloomops.api.queue_schemas import QUEUE_SCHEMAS

REQUEST_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    **CORE_SCHEMAS, **QUEUE_SCHEMAS, **APPROVAL_SCHEMAS}
