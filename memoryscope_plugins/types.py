"""The data the engine speaks: messages in, memory records stored, retrieval results out."""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any


class MemoryType(str, enum.Enum):
    """What kind of memory a record is. Ranking weights default to insight > observation > custom > turn."""

    TURN = "turn"
    OBSERVATION = "observation"
    INSIGHT = "insight"
    CUSTOM = "custom"
    PROCEDURE = "procedure"  # what an agent learnt from its runs; kept under the agent's scope (docs/procedural.md)


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
    ("Caroline"); `timestamp` defaults to now when omitted. `key`, when given, is the caller's own id
    of the message (a chat message id): a key is recorded once per user, so recording the message
    again (a retry, another agent of the team) records nothing and returns the same id.
    """

    role: str
    content: str
    name: str | None = None
    timestamp: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_call: ToolCall | None = None  # role "tool": one call an agent made (docs/procedural.md)
    key: str | None = None  # the caller's id of the message: recorded once per user (`message_keys`)


@dataclass(slots=True)
class ToolCall:
    """One call an agent made to a tool, recorded as a message of role ``"tool"``.

    `arguments` is the JSON object the tool was called with; `status` is ``"ok"`` (with the
    `result` text, if any), ``"error"`` (with the `error` text, if any) or ``"unknown"`` (the call
    was made but its outcome never seen, e.g. an interrupted run: no result, no error); None (the
    default) means ``"error"`` when `error` is given, else ``"ok"``. `duration_ms` is how long the call took, when
    known; `call_id` the framework's id of the call, if any. The call is the agent's (`agent_id`),
    never the human's words: it is logged and counted in `MemoryScope.tool_stats`, never made into a
    memory of the user.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    result: str | None = None
    error: str | None = None
    duration_ms: float | None = None
    call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the shape the message log keeps)."""
        return {"name": self.name, "arguments": dict(self.arguments), "status": self.status, "result": self.result,
                "error": self.error, "duration_ms": self.duration_ms, "call_id": self.call_id}


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
        # every field in declaration order, positionally: retrieval copies each memory it returns
        copied = Memory(*_memory_fields(self))
        copied.metadata = dict(self.metadata)
        copied.source_ids = list(self.source_ids)
        return copied

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


_memory_fields = operator.attrgetter(*(f.name for f in fields(Memory)))


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
    procedures: list[ScoredMemory] = field(default_factory=list)  # "What worked before" (procedures.enabled)
    tool_notes: list[ToolStats] = field(default_factory=list)  # the figures of the given tools that failed before

    def __iter__(self):
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


class EntityKind(str, enum.Enum):
    """What an entity of the ledger is. `UNKNOWN` is a name `record` found by the message's writing
    alone (no model said what it names yet); consolidation makes it a kind, merges or drops it."""

    PERSON = "person"
    PLACE = "place"
    ORGANIZATION = "organization"
    PET = "pet"
    OBJECT = "object"
    TOPIC = "topic"
    UNKNOWN = "unknown"


@dataclass(slots=True)
class Entity:
    """One person, place, organisation, pet, object or topic a user's conversations name.

    `name` is the canonical name, `aliases` the other names it goes by ("Mel" for "Melanie", 小王
    for 王磊). The mention figures are computed by the store from the entity's mentions (so they
    stay right when memories or entities are deleted or merged): `mention_count` counts the
    messages that name it, the times are those messages' times and, when known, the events' times.
    """

    id: str
    user_id: str
    name: str
    kind: EntityKind = EntityKind.TOPIC
    aliases: list[str] = field(default_factory=list)
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)
    metadata: dict[str, Any] = field(default_factory=dict)
    # computed from the mentions when read; ignored when written
    mention_count: int = 0
    first_mentioned_at: datetime | None = None
    last_mentioned_at: datetime | None = None
    last_event_at: datetime | None = None

    @property
    def names(self) -> list[str]:
        """The canonical name, then the aliases."""
        return [self.name, *self.aliases]


@dataclass(slots=True)
class EntityMention:
    """A memory that names an entity. `counted` mentions are messages (turns, memories added by
    hand): each is one mention; memories derived from them (observations, insights) link as
    evidence without counting again."""

    entity_id: str
    memory_id: str
    user_id: str
    said_at: datetime  # the memory's message time
    event_at: datetime | None = None  # the memory's event time, when known
    counted: bool = True


@dataclass(slots=True)
class ProfileValue:
    """One value of one key of a user's profile ("home": "Leeds"), with the memories it rests on.

    Current values have no `valid_to`; a replaced value keeps its `valid_to` (when the value that
    replaced it became true) and `superseded_by`, as expired memories do: history, not overwrite.
    `set_by` is "model" (consolidation) or "user" (a correction, which the model never overrides
    with anything said before it)."""

    id: str
    user_id: str
    key: str
    value: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    source_ids: list[str] = field(default_factory=list)
    set_by: str = "model"
    superseded_by: str | None = None
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)

    @property
    def current(self) -> bool:
        return self.valid_to is None and self.superseded_by is None


@dataclass(slots=True)
class EntityDetails:
    """What `MemoryScope.entity` returns: one entity of the ledger with its figures, how often it
    was mentioned per week or month (`timeline`: (period start in UTC, count), oldest first), its
    active memories (observations and insights first, then memories added by hand, then turns,
    each group newest first) and, when the entity is the user, the user's current profile."""

    entity: Entity
    timeline: list[tuple[datetime, int]] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)
    profile: list[ProfileValue] = field(default_factory=list)


@dataclass(slots=True)
class ToolStats:
    """What `MemoryScope.tool_stats` returns for one tool of one agent, counted from its logged calls.

    `errors` are the most frequent failures by normalised error text (numbers, ids, paths, quoted
    strings and mid-sentence names replaced by placeholders), with their counts, most frequent first.
    `shapes` are the argument shapes (top-level argument names with their JSON types, never values)
    with how often calls of that shape succeeded and failed, most used first. `p50_ms` and `p95_ms`
    are nearest-rank percentiles of the calls with a duration (`timed_calls`), each reported as the
    upper bound of its latency bucket: never below the true value and less than 4.5 % above it
    (None when no call had a duration). `first_used` and `last_used` are the calls' message times.
    `unknown` counts the calls whose outcome was never seen (status ``"unknown"``): they are in
    `calls`, neither failed nor succeeded, and in no argument shape.
    """

    agent_id: str
    tool: str
    calls: int
    failures: int
    errors: list[tuple[str, int]] = field(default_factory=list)
    timed_calls: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    shapes: list[tuple[str, int, int]] = field(default_factory=list)  # (shape, succeeded, failed)
    first_used: datetime | None = None
    last_used: datetime | None = None
    error_kinds: int = 0  # distinct normalised errors (`errors` shows the top ones)
    shape_kinds: int = 0  # distinct argument shapes (`shapes` shows the top ones)
    unknown: int = 0  # calls whose outcome was never seen

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601)."""
        return {"agent_id": self.agent_id, "tool": self.tool, "calls": self.calls, "failures": self.failures,
                "errors": [{"error": e, "count": n} for e, n in self.errors], "error_kinds": self.error_kinds,
                "timed_calls": self.timed_calls, "p50_ms": self.p50_ms, "p95_ms": self.p95_ms,
                "shapes": [{"shape": s, "succeeded": ok, "failed": bad} for s, ok, bad in self.shapes],
                "shape_kinds": self.shape_kinds, "unknown": self.unknown,
                "first_used": None if self.first_used is None else self.first_used.isoformat(),
                "last_used": None if self.last_used is None else self.last_used.isoformat()}
