"""`StoreOverview`: a store's numbers at a glance, for ``memoryscope-plugins stats`` and ``/metrics``.

Counts only, never a user id or a text: logged messages per state, the logged time of the first
message still pending (the consolidation lag), users, memories per type and status. Each backend
answers with a few aggregate queries (`StoreBase.overview`); the SQL ones share `SQL_QUERIES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable

from ..errors import ConfigError
from ..types import as_aware
from .messages import MESSAGE_STATES, PENDING

# the SQL stores' queries, with {memories} and {messages} for their table names
SQL_QUERIES = {
    "messages": "SELECT state, COUNT(*) FROM {messages} GROUP BY state",
    "oldest_pending": f"SELECT timestamp FROM {{messages}} WHERE state = '{PENDING}' ORDER BY seq LIMIT 1",
    "users": "SELECT COUNT(*) FROM (SELECT user_id FROM {memories} UNION SELECT user_id FROM {messages}) u",
    "memories": "SELECT type, status, COUNT(*) FROM {memories} GROUP BY type, status",
}


@dataclass(frozen=True)
class StoreOverview:
    """What a store holds, in counts. ``oldest_pending`` is the timestamp of the first message of the
    log still pending: when it was recorded, unless the caller gave the message a time of its own."""

    users: int = 0
    messages: dict[str, int] = field(default_factory=dict)  # state -> count, every state present
    oldest_pending: datetime | None = None
    memories: dict[tuple[str, str], int] = field(default_factory=dict)  # (type, status) -> count

    @property
    def pending(self) -> int:
        return self.messages.get(PENDING, 0)

    def oldest_pending_age_s(self, now: datetime) -> float:
        """Seconds the first pending message has waited (0.0 when nothing is pending)."""
        if self.oldest_pending is None:
            return 0.0
        return max(0.0, (now - self.oldest_pending).total_seconds())

    def memories_by_type(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (kind, _status), count in self.memories.items():
            totals[kind] = totals.get(kind, 0) + count
        return totals

    def to_dict(self, now: datetime) -> dict[str, Any]:
        """JSON-ready: the counts, the oldest pending time (ISO) and its age in seconds."""
        return {"users": self.users, "messages": dict(self.messages), "pending": self.pending,
                "oldest_pending": self.oldest_pending.isoformat() if self.oldest_pending else None,
                "oldest_pending_age_s": round(self.oldest_pending_age_s(now), 3),
                "memories": self.memories_by_type(),
                "memories_by_status": {f"{kind}/{status}": n for (kind, status), n in sorted(self.memories.items())}}


def from_rows(*, messages: Iterable[tuple[str, int]], oldest_pending: str | None, users: int,
              memories: Iterable[tuple[str, str, int]]) -> StoreOverview:
    """An overview from the rows of the four queries (every message state present, 0 when none)."""
    per_state = dict.fromkeys(MESSAGE_STATES, 0)
    for state, count in messages:
        per_state[str(state)] = per_state.get(str(state), 0) + int(count)
    return StoreOverview(users=int(users), messages=per_state,
                         oldest_pending=as_aware(datetime.fromisoformat(oldest_pending)) if oldest_pending else None,
                         memories={(str(kind), str(status)): int(n) for kind, status, n in memories})


def sql_overview(run: Callable[[str], list[Any]], fill: Callable[[str], Any]) -> StoreOverview:
    """`SQL_QUERIES` run by `run` on the texts `fill` makes of them (table names put in)."""
    oldest = run(fill(SQL_QUERIES["oldest_pending"]))
    return from_rows(messages=run(fill(SQL_QUERIES["messages"])), oldest_pending=oldest[0][0] if oldest else None,
                     users=run(fill(SQL_QUERIES["users"]))[0][0], memories=run(fill(SQL_QUERIES["memories"])))


def store_overview(store: Any) -> StoreOverview:
    """The overview of any store that reports one (the SQLite, PostgreSQL and Elasticsearch stores do)."""
    report = getattr(store, "overview", None)
    if report is None:
        raise ConfigError(f"{type(store).__name__} does not report an overview (it has no `overview` method)")
    return report()
