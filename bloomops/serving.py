"""How gunicorn serves bloomops (``gunicorn -c python:bloomops.serving``; docs/DEPLOY.md).

A synchronous worker belongs to one connection until its request has fully arrived: three
clients that never finish their headers (or send less body than their Content-Length) held
all three of ``make run``'s workers until gunicorn's timeout killed them, and every other
request waited. Here each worker serves many connections from a pool of threads, and a
connection that stops sending for ``BLOOMOPS_CLIENT_TIMEOUT_SECONDS`` is given up: a
stalled request line or header is closed, and a stalled body ends the read, which the API
answers 400 (api/guard.py). A buffering proxy in front (docs/DEPLOY.md) keeps slow clients
away from gunicorn altogether; this is the floor without one.
"""

from __future__ import annotations

import os

import gunicorn
from gunicorn.workers import gthread

# The timeout below is set where gunicorn 27 initialises a connection, inside handle(); 22
# and 23 did so before it, and a stalled client there kept its thread for good.
if int(gunicorn.__version__.split(".")[0]) < 27:
    raise RuntimeError(f"bloomops.serving needs gunicorn 27 (found {gunicorn.__version__})")


def _int(name: str, default: int) -> int:
    return max(1, int(os.environ.get(name) or default))


# Seconds a client may pause while sending its request (gunicorn's own wait for the first
# byte of a connection is 5 s; this bounds every read after it).
CLIENT_TIMEOUT_SECONDS = _int("BLOOMOPS_CLIENT_TIMEOUT_SECONDS", 10)

worker_class = "bloomops.serving.ThreadWorker"
workers = _int("BLOOMOPS_WEB_WORKERS", 3)
threads = _int("BLOOMOPS_WEB_THREADS", 8)
timeout = 30
graceful_timeout = 5
keepalive = 5
# gunicorn 27's control socket is one path per user (~/.gunicorn/gunicorn.ctl): a second
# server on the machine (the test suite's beside make run, two clones) took it over from
# the first. bloomops is restarted, not steered through it (docs/DEPLOY.md).
control_socket_disable = True


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's threaded worker, whose connections time out while a client pauses."""

    def handle(self, conn):
        if not getattr(conn, "bloomops_timed", False):
            opened = conn.init

            # gunicorn makes the socket blocking (no timeout) before each request, then
            # calls init (which may wrap it for TLS): the timeout is set after both.
            def init() -> None:
                opened()
                conn.sock.settimeout(CLIENT_TIMEOUT_SECONDS)

            conn.init = init
            conn.bloomops_timed = True
        return super().handle(conn)
