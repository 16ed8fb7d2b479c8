"""bloomops' own statistics tables (RULES.md#statistics): telemetry the recorder derives from
TapDB, never workflow truth. Every row can be dropped and is made again by the recorder;
nothing in the engine decides anything from them."""

from __future__ import annotations

from django.db import models


class QueueSnapshot(models.Model):
    """The latest queue overview of one tenant, as the recorder computed it."""

    # "" is the tenant of rows with tenant_id NULL (BLOOMOPS_TENANT_ID=none)
    tenant = models.CharField(max_length=64, unique=True)
    taken_at = models.DateTimeField()
    interval_seconds = models.PositiveIntegerField()
    data = models.JSONField()
    # The instant up to which the recorder has counted finished records (its counter cursor).
    counted_to = models.DateTimeField()
    # Set when a queue is made, changed or retired after the snapshot was taken: readers go
    # live until the recorder's next pass (the snapshot no longer shows every queue as it is).
    stale = models.BooleanField(default=False)

    class Meta:
        db_table = "bloomops_queue_snapshot"

    def __str__(self) -> str:
        return f"snapshot of {self.tenant or 'tenant NULL'} at {self.taken_at}"


class QueueCounter(models.Model):
    """A monotonic counter per queue (expired_leases_total, ...), advanced by the recorder."""

    tenant = models.CharField(max_length=64)
    queue_key = models.CharField(max_length=200)
    name = models.CharField(max_length=64)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "bloomops_queue_counter"
        constraints = [models.UniqueConstraint(fields=["tenant", "queue_key", "name"],
                                               name="bloomops_queue_counter_key")]

    def __str__(self) -> str:
        return f"{self.queue_key} {self.name} = {self.value}"


class QueueSample(models.Model):
    """One queue's figures over one minute (resolution 60) or, once thinned, one hour
    (resolution 3600): gauges as last seen (thinned: the hour's highest), completions and
    failures summed, with the window of finished records they count."""

    tenant = models.CharField(max_length=64)
    queue_key = models.CharField(max_length=200)
    resolution = models.PositiveIntegerField()
    at = models.DateTimeField()
    depth = models.IntegerField(default=0)
    oldest_age_seconds = models.FloatField(default=0)
    leased = models.IntegerField(default=0)
    held = models.IntegerField(default=0)
    dead_letters = models.IntegerField(default=0)
    retry_pending = models.IntegerField(default=0)
    completions = models.IntegerField(default=0)
    failures = models.IntegerField(default=0)
    # The records its completions and failures count: those finished in (counted_from,
    # counted_to], the windows of the passes that wrote it (none for a seeding pass's).
    counted_from = models.DateTimeField(null=True)
    counted_to = models.DateTimeField(null=True)

    class Meta:
        db_table = "bloomops_queue_sample"
        constraints = [models.UniqueConstraint(fields=["tenant", "resolution", "at", "queue_key"],
                                               name="bloomops_queue_sample_key")]

    def __str__(self) -> str:
        return f"{self.queue_key} at {self.at} ({self.resolution} s)"
