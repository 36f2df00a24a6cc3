"""`serving(folder, ring)`: a real `serve` process (server_harness.ServeProcess) with these keys, as a context."""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator

from memoryscope_plugins.server import KeyRing
from tests.support.server_harness import ServeProcess


@contextlib.contextmanager
def serving(folder, ring: KeyRing, *extra: str) -> Iterator[ServeProcess]:
    """Start `serve` on ``folder/memory.db`` with `ring` as its key file; stop it with SIGINT (a clean stop)."""
    srv = ServeProcess(folder, *extra)
    ring.save(srv.keys_file)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(signal.SIGINT)
