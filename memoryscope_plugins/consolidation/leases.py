"""The worker's side of the per-user lease.

`LeaseHeartbeat`: while a worker works on a user, a daemon thread renews the user's lease every
third of its TTL, so a short TTL (a dead worker's users move on within seconds) never expires
under a live worker that is waiting for a slow model call. A renewal that finds the lease lapsed
or taken marks it lost: the step's next commit is abandoned (and would be refused by the store's
fenced commit anyway). A renewal that fails on a store error is retried at the next beat; the
fence keeps a late commit out either way.

`HeldElsewhere`: users a worker skipped because another worker holds their lease are tried again
every fifth of the TTL rather than at the next sweep (`every_seconds`), so when that worker has
died its users are taken over soon after its lease lapses.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Callable

from ..errors import StoreError
from ..log_hygiene import user_ref

log = logging.getLogger(__name__)


class LeaseHeartbeat:
    """Renews one user's lease in the background while used as a context manager.

    ``renew`` takes (or renews) the lease and says whether it is still ours; it is called every
    ``interval_s`` seconds until the block ends or a renewal says no (then `lost` is true).
    """

    def __init__(self, user_id: str, renew: Callable[[], bool], interval_s: float) -> None:
        self.user_id = user_id
        self._renew = renew
        self._interval = interval_s
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def lost(self) -> bool:
        """True once a renewal found the lease held by another worker."""
        return self._lost.is_set()

    def __enter__(self) -> LeaseHeartbeat:
        self._thread = threading.Thread(target=self._run, name="memoryscope-lease-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()  # no renewal may land after the caller releases the lease
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                held = self._renew()
            except StoreError as exc:
                log.warning("could not renew the lease of user %s: %s", user_ref(self.user_id), type(exc).__name__)
                continue
            if not held:
                self._lost.set()
                log.warning("the lease of user %s was taken over; its step will not commit", user_ref(self.user_id))
                return


class HeldElsewhere:
    """Users whose lease another worker held when this one tried, each with when to try again."""

    def __init__(self, retry_s: float) -> None:
        self._retry_s = retry_s
        self._at: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, user_id: str) -> None:
        with self._lock:
            self._at[user_id] = time.monotonic() + self._retry_s

    def next_at(self) -> float:
        """When the first of them is due (infinity when there is none)."""
        with self._lock:
            return min(self._at.values(), default=float("inf"))

    def take_due(self) -> set[str]:
        """The users due now, forgotten (they are added again if still held)."""
        now = time.monotonic()
        with self._lock:
            due = {user_id for user_id, at in self._at.items() if at <= now}
            for user_id in due:
                del self._at[user_id]
        return due
