"""Every demo handler: the wet-lab chain and the compute flow in one worker."""

from __future__ import annotations

from bloomops.worker.handlers import compute, wetlab


class Handlers(compute.Handlers, wetlab.Handlers):
    CAPABILITIES = wetlab.Handlers.CAPABILITIES + compute.Handlers.CAPABILITIES
    HANDLERS = {**wetlab.Handlers.HANDLERS, **compute.Handlers.HANDLERS}
