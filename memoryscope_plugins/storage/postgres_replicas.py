"""Reads of the PostgreSQL store served by hot standbys (``store.read_urls``): which standby a read
goes to, whether it may, and what happens when it cannot answer.

- **Routing**: round robin over the standbys that are healthy; none healthy: the primary.
- **Health**: a thread checks every standby every `check_interval_s` on a connection of its own
  (not the pool's): it must answer, be in recovery (a promoted standby is not read from: its data
  may no longer be the primary's), and be no further behind than `max_lag_s`. The lag (`_lag`) is 0
  when it streams and has replayed all it received; the time since the previous check when it
  streams and has replayed all it had received then; else the age of the last transaction it
  replayed (the conservative reading: a standby that lost its primary, or replays slowly, ages). A
  standby that fails a check, or whose connection fails during a read, is skipped until a check
  passes again, at least `cooldown_s` (three check intervals) after it went away.
  Each change of a standby's state is one log line (with the DSN's password left out) and one
  count for the metrics (`metrics.Recorder.replica_state`).
- **Read your writes** (within this process): after a write, the store gives the users it wrote
  and the primary's WAL insert position after the commit (`wrote`); a read for such a user goes to
  a standby only when that standby has replayed up to that position (`caught_up`: known from the
  last check, or asked on the read's own connection), else to the primary. So a read that follows
  a write of the same process always sees it, however far behind the standbys are. The positions
  of the last `_WRITTEN_USERS` users written are kept; one dropped to make room becomes a floor
  every read waits for (the oldest kept: a standby that is not far behind has passed it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from .. import metrics
from ..errors import StoreError
from ..log_hygiene import without_password

log = logging.getLogger(__name__)

OK, DOWN, LAGGING, NOT_STANDBY, UNKNOWN = "ok", "down", "lagging", "not_standby", "unknown"
_WRITTEN_USERS = 100_000  # users whose last write position is kept (least recently written dropped first)

# in recovery; replayed and received positions (bytes since 0/0); whether its WAL receiver streams (its
# status is hidden from roles without pg_read_all_stats: then a running receiver counts as streaming);
# the age of the last transaction it replayed (seconds; infinite when none)
_CHECK = (
    "SELECT pg_is_in_recovery(), COALESCE(pg_last_wal_replay_lsn() - '0/0'::pg_lsn, 0)::bigint, "
    "COALESCE(pg_last_wal_receive_lsn() - '0/0'::pg_lsn, 0)::bigint, "
    "COALESCE((SELECT COALESCE(status, 'streaming') = 'streaming' FROM pg_stat_wal_receiver), false), "
    "COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8, 'Infinity'::float8)")
_REPLAYED = "SELECT COALESCE(pg_last_wal_replay_lsn() - '0/0'::pg_lsn, 0)::bigint"
# where the primary's WAL ends after a commit: at or past the commit's own record
INSERT_POSITION = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"


class BehindIndex(Exception):
    """A standby is behind the in-process index of the user being searched (`user_index`): reading
    it would rebuild that index from older rows, so the primary answers instead."""


@dataclass
class Standby:
    """One standby: its pool, its state and what it is known to have replayed."""

    number: int  # its place in store.read_urls (the metrics' label)
    label: str  # its DSN without the password
    pool: ConnectionPool
    conninfo: str
    connect_kwargs: dict[str, Any] = field(repr=False)  # of its health check's connection
    state: str = UNKNOWN
    lag_s: float | None = None
    replayed: int = 0  # a WAL position it has replayed since it last came up (0: none known)
    previous: tuple[int, float] | None = None  # (received position, monotonic time) at the last check
    measured: int = 0  # the replayed position of the last check
    left_at: float = float("-inf")  # when it last left the "ok" state (monotonic)
    probe: psycopg.Connection | None = field(default=None, repr=False)


class ReplicaRouter:
    """The standbys of one store (see the module's docstring)."""

    def __init__(self, dsns: Iterable[str], *, connect_kwargs: dict[str, Any],
                 configure: Callable[[psycopg.Connection], None], max_lag_s: float, pool_max_size: int,
                 connect_timeout_s: float, check_interval_s: float = 1.0, name: str = "memoryscope") -> None:
        self.max_lag_s = float(max_lag_s)
        self.check_interval_s = max(0.05, float(check_interval_s))
        self.cooldown_s = 3 * self.check_interval_s  # a standby that went away is not read again sooner
        # a standby that does not answer is skipped after this long (never longer than the primary's wait)
        self._timeout_s = max(1.0, min(float(connect_timeout_s), 5.0))
        connect_kwargs = {**connect_kwargs, "connect_timeout": int(self._timeout_s)}
        self._lock = threading.Lock()
        self._checking = threading.Lock()
        self._next = 0
        self._written: OrderedDict[str, int] = OrderedDict()
        # writes whose users are not known (re-embedding) or no longer kept: every read waits for them
        self._written_any = 0
        self._stop = threading.Event()
        self.standbys: list[Standby] = []
        for number, dsn in enumerate(dsns):
            try:
                given = {*conninfo_to_dict(dsn), *connect_kwargs}
            except psycopg.ProgrammingError:  # its text may quote the DSN, password included
                raise StoreError(f"store.read_urls[{number}] is not a PostgreSQL connection string") from None
            # a standby that vanishes from the network (no reset of its connections) fails the reads in
            # flight on it after seconds, not after the system's TCP timeouts (minutes); the DSN's own win
            dead_host = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                         "tcp_user_timeout": int(self._timeout_s * 1000)}
            kwargs = {**connect_kwargs, **{k: v for k, v in dead_host.items() if k not in given}}
            pool = ConnectionPool(dsn, min_size=0, max_size=pool_max_size, kwargs=kwargs,
                                  configure=configure, open=False, timeout=self._timeout_s,
                                  name=f"{name}-standby{number}")
            pool.open(wait=False)
            self.standbys.append(Standby(number=number, label=without_password(dsn), pool=pool, conninfo=dsn,
                                         connect_kwargs={**kwargs, "autocommit": True}))
        self._first_checks()
        self._thread = threading.Thread(target=self._run, name=f"{name}-standby-checks", daemon=True)
        self._thread.start()

    # -- health ---------------------------------------------------------------------------------
    def _first_checks(self, tries: int = 10) -> None:
        """The checks at start. The primary has usually just been written (the schema), so a standby
        may be replaying that: a standby found lagging is measured again a few times, 50 ms apart
        (the second measure knows what it had received), before it is called lagging."""
        for standby in self.standbys:
            for _ in range(tries):
                state, why = self._measure(standby)
                if state != LAGGING:
                    break
                time.sleep(0.05)
            self._apply(standby, state, why)

    def _run(self) -> None:
        while not self._stop.wait(self.check_interval_s):
            self.check_all()

    def check_all(self) -> None:
        """Check every standby now (the thread does it every `check_interval_s`)."""
        with self._checking:
            for standby in self.standbys:
                self._check(standby)

    def _check(self, standby: Standby) -> None:
        self._apply(standby, *self._measure(standby))

    def _measure(self, standby: Standby) -> tuple[str, str]:
        """The state `standby` is in now, and why (its replayed position noted when it is usable)."""
        try:
            if standby.probe is None or standby.probe.closed:
                standby.probe = psycopg.connect(standby.conninfo, **standby.connect_kwargs)
            row = standby.probe.execute(_CHECK).fetchone()
        except psycopg.Error as exc:
            self._close_probe(standby)
            return DOWN, f"unreachable ({type(exc).__name__})"
        assert row is not None
        in_recovery, replayed = bool(row[0]), int(row[1])
        lag = standby.lag_s = self._lag(standby, replayed, int(row[2]), bool(row[3]), float(row[4]))
        if not in_recovery:
            return NOT_STANDBY, "not in recovery (promoted, or not a standby): not read from"
        if lag > self.max_lag_s:
            return LAGGING, f"more than store.max_replica_lag_s={self.max_lag_s:g} s behind"
        standby.measured = replayed
        return OK, "in use for reads"

    def _apply(self, standby: Standby, state: str, why: str) -> None:
        if state == OK and standby.state != OK:
            if time.monotonic() - standby.left_at < self.cooldown_s:
                return  # back too soon after it went away: kept out a little longer (no flapping)
            standby.pool.check()  # connections cut while it was away are dropped, not handed out
        self._set(standby, state, why)
        if state == OK:
            with self._lock:
                if standby.state == OK:  # what it had replayed when measured: it only moves forward while up
                    standby.replayed = max(standby.replayed, standby.measured)

    @staticmethod
    def _lag(standby: Standby, replayed: int, received: int, streaming: bool, age_s: float) -> float:
        """How far behind the primary `standby` is, in seconds, at most: 0 when it streams and has
        replayed all it received; when it streams and has replayed all it had received at the
        previous check, the time since that check; otherwise the age of the last transaction it
        replayed (an over-estimate after an idle primary: the next check corrects it)."""
        now = time.monotonic()
        previous, standby.previous = standby.previous, (received, now) if streaming else None
        if streaming and received <= replayed:
            return 0.0
        if streaming and previous is not None and previous[0] <= replayed:
            return now - previous[1]
        return age_s

    @staticmethod
    def _close_probe(standby: Standby) -> None:
        if standby.probe is not None:
            try:
                standby.probe.close()
            except psycopg.Error:
                pass
            standby.probe = None

    def _set(self, standby: Standby, state: str, why: str) -> None:
        """Move `standby` to `state`: one log line and one metric count per change."""
        with self._lock:
            if standby.state == state:
                return
            before, standby.state = standby.state, state
            if state != OK:
                standby.replayed = 0  # what it replayed is known again once it is back
                standby.left_at = time.monotonic()
        # the first check's "ok" is routine; every other change (a return included: it ends a
        # warning an operator has seen) is a warning
        level = logging.INFO if state == OK and before == UNKNOWN else logging.WARNING
        suffix = "" if state == OK else "; its reads go to another standby or the primary"
        log.log(level, "read standby %d (%s): %s -> %s, %s%s", standby.number, standby.label, before, state, why,
                suffix)
        metrics.recorder().replica_state(str(standby.number), state)

    def failed(self, standby: Standby, exc: BaseException) -> None:
        """A read on `standby` failed to reach it: skipped until a check passes again."""
        self._set(standby, DOWN, f"a read failed ({type(exc).__name__})")

    # -- routing --------------------------------------------------------------------------------
    def pick(self) -> Standby | None:
        """The next healthy standby in turn, or None (read the primary)."""
        with self._lock:
            healthy = [s for s in self.standbys if s.state == OK]
            if not healthy:
                return None
            self._next = (self._next + 1) % len(healthy)
            return healthy[self._next]

    def wrote(self, users: Iterable[str] | None, position: int) -> None:
        """This process committed a write of `users` (None: users unknown) ending before WAL `position`."""
        with self._lock:
            if users is None:
                self._written_any = max(self._written_any, position)
                return
            for user in users:
                self._written[user] = max(self._written.get(user, 0), position)
                self._written.move_to_end(user)
            while len(self._written) > _WRITTEN_USERS:  # a dropped user's write: every read waits for it
                self._written_any = max(self._written_any, self._written.popitem(last=False)[1])

    def caught_up(self, standby: Standby, conn: psycopg.Connection, user_id: str | None) -> bool:
        """Whether `standby` (read through `conn`) has replayed this process's last write of `user_id`."""
        with self._lock:
            need = max(self._written_any, self._written.get(user_id, 0) if user_id is not None else 0)
            if need <= standby.replayed:
                return True
        row = conn.execute(_REPLAYED).fetchone()
        replayed = int(row[0]) if row is not None else 0
        with self._lock:
            if standby.state == OK:
                standby.replayed = max(standby.replayed, replayed)
        return replayed >= need

    @contextmanager
    def connection(self, standby: Standby) -> Iterator[psycopg.Connection]:
        """A pooled connection to `standby` for reads outside a transaction."""
        with standby.pool.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                conn.autocommit = False

    def states(self) -> list[tuple[str, str, float | None]]:
        """Each standby's (label, state, last measured lag in seconds)."""
        return [(s.label, s.state, s.lag_s) for s in self.standbys]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.check_interval_s + self._timeout_s + 1)
        for standby in self.standbys:
            self._close_probe(standby)
            standby.pool.close()
