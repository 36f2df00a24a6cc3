"""The data the engine speaks: messages in, memory records stored, retrieval results out."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


class MemoryType(str, enum.Enum):
    """What kind of memory a record is. Ranking weights default to insight > observation > custom > turn."""

    TURN = "turn"
    OBSERVATION = "observation"
    INSIGHT = "insight"
    CUSTOM = "custom"


class MemoryStatus(str, enum.Enum):
    """Active memories are retrieved by default; expired ones were superseded and stay for history."""

    ACTIVE = "active"
    EXPIRED = "expired"


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def as_aware(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC, so every stored time is comparable."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A half-open time interval [start, end). Either side may be None (open)."""

    start: datetime | None
    end: datetime | None

    def overlaps(self, start: datetime | None, end: datetime | None) -> bool:
        """Whether [start, end) meets this range; a missing end means an instant."""
        if start is None:
            return False
        if self.end is not None and start >= self.end:
            return False
        if self.start is not None:
            if end is None:
                return start >= self.start
            # half-open on both sides: September ([1 Sep, 1 Oct)) does not meet October
            return end > self.start
        return True


@dataclass(slots=True)
class Message:
    """One message of a conversation, as given to `MemoryScope.record`.

    `role` is "user", "assistant" or "system"; `name` is the speaker's name as shown in memories
    ("Caroline"); `timestamp` defaults to now when omitted.
    """

    role: str
    content: str
    name: str | None = None
    timestamp: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Memory:
    """One stored memory record. Content is kept exactly as written."""

    id: str
    user_id: str
    agent_id: str
    content: str
    type: MemoryType = MemoryType.TURN
    status: MemoryStatus = MemoryStatus.ACTIVE
    created_at: datetime = field(default_factory=utc_now)  # the message time
    updated_at: datetime = field(default_factory=utc_now)
    event_start: datetime | None = None  # when the event itself happened, when known
    event_end: datetime | None = None
    speaker: str | None = None
    role: str | None = None
    session_id: str | None = None
    previous_id: str | None = None  # the turn before this one in the same conversation (turns only)
    context: str | None = None  # text indexed with the memory (e.g. the preceding turn), never shown
    superseded_by: str | None = None
    source_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding_model: str | None = None

    def copy(self) -> "Memory":
        """An independent copy (its metadata and source list are copied too)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values["metadata"] = dict(self.metadata)
        values["source_ids"] = list(self.source_ids)
        return Memory(**values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601), the shape used by export and import."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, list):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[name] = value
        return out


@dataclass(slots=True)
class ScoredMemory:
    """A retrieved memory with the scores that ranked it."""

    memory: Memory
    score: float
    scores: dict[str, float] = field(default_factory=dict)  # e.g. {"bm25": .., "vector": .., "fused": ..}


@dataclass(slots=True)
class RetrievalResult:
    """What `MemoryScope.retrieve` returns: ranked memories and a ready-to-inject context string."""

    query: str
    memories: list[ScoredMemory]
    context: str
    time_range: TimeRange | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    neighbours: list[Memory] = field(default_factory=list)  # turns shown in the context beside the hits
    second_hop: list[Memory] = field(default_factory=list)  # found by the names in the best hits, in the context

    def __iter__(self):
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)
