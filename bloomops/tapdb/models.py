"""Unmanaged Django models over TapDB's own tables.

TapDB owns these tables: its DDL (applied by ``bootstrap_tapdb``) creates them and its
triggers assign EUIDs, domain scoping and audit rows. Django never migrates them.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class TriggerSetTextField(models.TextField):
    """A column a BEFORE INSERT trigger fills; Django reads it back with RETURNING."""

    db_returning = True


class TriggerSetBigIntegerField(models.BigIntegerField):
    db_returning = True


class TapdbRow(models.Model):
    uid = models.BigAutoField(primary_key=True)
    euid = TriggerSetTextField(unique=True, default="", editable=False)
    euid_prefix = TriggerSetTextField(default="", editable=False)
    euid_seq = TriggerSetBigIntegerField(default=0, editable=False)
    name = models.TextField()
    tenant_id = models.UUIDField(null=True, blank=True)
    domain_code = TriggerSetTextField(default="", editable=False)
    issuer_app_code = TriggerSetTextField(default="", editable=False)
    polymorphic_discriminator = models.TextField()
    category = models.TextField()
    type = models.TextField()
    subtype = models.TextField()
    version = models.TextField()
    json_addl = models.JSONField(default=dict)
    bstatus = models.TextField(default="active")
    is_singleton = models.BooleanField(default=False)
    is_deleted = models.BooleanField(default=False)
    created_dt = models.DateTimeField(default=timezone.now)
    modified_dt = models.DateTimeField(default=timezone.now, null=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.euid} {self.name}"

    @property
    def properties(self) -> dict:
        props = (self.json_addl or {}).get("properties")
        return props if isinstance(props, dict) else {}


class GenericTemplate(TapdbRow):
    instance_prefix = models.TextField()
    instance_polymorphic_identity = models.TextField(null=True, blank=True)
    json_addl_schema = models.JSONField(null=True, blank=True)
    is_singleton = models.BooleanField(default=True)

    class Meta:
        managed = False
        db_table = "generic_template"

    @property
    def semantic_category(self) -> str:
        return str((self.json_addl or {}).get("semantic_category") or self.category)

    @property
    def code(self) -> str:
        """The semantic template code, e.g. ``data/execution/queue/1.0``."""
        return f"{self.semantic_category}/{self.type}/{self.subtype}/{self.version}"


class GenericInstance(TapdbRow):
    machine_uuid = models.UUIDField(null=True, blank=True, unique=True)
    template = models.ForeignKey(
        GenericTemplate, db_column="template_uid", on_delete=models.DO_NOTHING, related_name="+"
    )

    class Meta:
        managed = False
        db_table = "generic_instance"


class GenericInstanceLineage(models.Model):
    uid = models.BigAutoField(primary_key=True)
    euid = TriggerSetTextField(unique=True, default="", editable=False)
    euid_prefix = TriggerSetTextField(default="", editable=False)
    euid_seq = TriggerSetBigIntegerField(default=0, editable=False)
    name = models.TextField()
    tenant_id = models.UUIDField(null=True, blank=True)
    domain_code = TriggerSetTextField(default="", editable=False)
    issuer_app_code = TriggerSetTextField(default="", editable=False)
    polymorphic_discriminator = models.TextField(default="generic_instance_lineage")
    category = models.TextField(default="lineage")
    type = models.TextField(default="lineage")
    subtype = models.TextField(default="generic")
    version = models.TextField(default="1.0")
    parent_instance = models.ForeignKey(
        GenericInstance,
        db_column="parent_instance_uid",
        on_delete=models.DO_NOTHING,
        related_name="child_edges",
    )
    child_instance = models.ForeignKey(
        GenericInstance,
        db_column="child_instance_uid",
        on_delete=models.DO_NOTHING,
        related_name="parent_edges",
    )
    parent_type = models.TextField(null=True, blank=True)
    child_type = models.TextField(null=True, blank=True)
    relationship_type = models.TextField(default="generic")
    json_addl = models.JSONField(default=dict)
    bstatus = models.TextField(default="active")
    is_singleton = models.BooleanField(default=False)
    is_deleted = models.BooleanField(default=False)
    created_dt = models.DateTimeField(default=timezone.now)
    modified_dt = models.DateTimeField(default=timezone.now, null=True)

    class Meta:
        managed = False
        db_table = "generic_instance_lineage"

    def __str__(self) -> str:
        return f"{self.parent_instance_id} -{self.relationship_type}-> {self.child_instance_id}"


class AuditLog(models.Model):
    uid = models.BigAutoField(primary_key=True)
    euid = models.TextField(unique=True)
    euid_prefix = models.TextField()
    euid_seq = models.BigIntegerField()
    tenant_id = models.UUIDField(null=True)
    domain_code = models.TextField()
    issuer_app_code = models.TextField()
    rel_table_name = models.TextField()
    column_name = models.TextField(null=True)
    rel_table_uid_fk = models.BigIntegerField()
    rel_table_euid_fk = models.TextField()
    old_value = models.TextField(null=True)
    new_value = models.TextField(null=True)
    changed_by = models.TextField(null=True)
    changed_at = models.DateTimeField()
    operation_type = models.TextField(null=True)
    json_addl = models.JSONField(null=True)
    category = models.TextField(null=True)
    deleted_record_json = models.JSONField(null=True)
    is_deleted = models.BooleanField(default=False)
    is_singleton = models.BooleanField(default=False)

    class Meta:
        managed = False
        db_table = "audit_log"

    def __str__(self) -> str:
        return f"{self.operation_type} {self.rel_table_euid_fk} {self.column_name or ''}"


class OutboxEvent(models.Model):
    id = models.BigAutoField(primary_key=True)
    message = models.ForeignKey(
        GenericInstance, db_column="message_uid", on_delete=models.DO_NOTHING, related_name="+"
    )
    tenant_id = models.UUIDField(null=True)
    domain_code = models.TextField(db_default=models.Func(function="tapdb_current_domain_code"))
    issuer_app_code = models.TextField(
        db_default=models.Func(function="tapdb_current_owner_repo_name")
    )
    destination = models.TextField()
    dedupe_key = models.TextField()
    status = models.TextField(default="pending")
    attempt_count = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(null=True)
    created_dt = models.DateTimeField(default=timezone.now)
    claimed_by = models.TextField(null=True)
    claim_token = models.UUIDField(null=True)
    claimed_dt = models.DateTimeField(null=True)
    lease_expires_dt = models.DateTimeField(null=True)
    last_attempt_dt = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = "outbox_event"

    def __str__(self) -> str:
        return f"{self.destination} {self.dedupe_key} {self.status}"
