"""The labelled times a listing shows for a memory: when it was said or recorded, and its event time.

A memory carries two times: ``created_at`` (when its message was said, or when it was recorded)
and, when known, an event range (when what it tells happened; for a turn, the date its words
mention). A listing shows both, labelled, so a reader never takes one for the other:

    said 2026-11-25 Wed · event 2026-10
    said 2026-11-25 Wed · mentions 2026-10
    recorded 2026-11-26 Thu
    said 2026-11-25 Wed · since 2026-05

Whole months and years read "2026-10" / "2026"; other ranges as `format_time_span`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..types import Memory, MemoryType
from .formatting import format_memory_time, format_time_span

SEPARATOR = " · "
_SAID_ROLES = ("user", "assistant")
_LABELS = {
    "en": {"said": "said", "recorded": "recorded", "event": "event", "mentions": "mentions", "since": "since"},
    "zh": {"said": "说于", "recorded": "记录于", "event": "事件", "mentions": "提到", "since": "始于"},
}


def _whole_unit(start: datetime, end: datetime) -> str | None:
    """"2026-10" for exactly one calendar month, "2026" for one year, else None."""
    if start.time() != end.time() or start.hour or start.minute or start.second or start.day != 1 or end.day != 1:
        return None
    months = (end.year - start.year) * 12 + end.month - start.month
    if months == 1:
        return f"{start.year}-{start.month:02d}"
    if months == 12 and start.month == 1:
        return f"{start.year}"
    return None


def event_text(start: datetime, end: datetime | None, language: str = "en") -> str:
    """An event range as a listing shows it ("2026-10", "2026", "2026-10-03 Sat", a span)."""
    if end is not None and end.tzinfo is not None and start.tzinfo is not None:
        end = end.astimezone(start.tzinfo)
    if end is not None and end - start >= timedelta(days=28):
        unit = _whole_unit(start, end)
        if unit is not None:
            return unit
    return format_time_span(start, end, language)


def said_label(memory: Memory) -> str:
    """"said" for what someone said (turns, observations of a message), else "recorded"."""
    said = memory.type in (MemoryType.TURN, MemoryType.OBSERVATION) and (memory.role in _SAID_ROLES
                                                                          or memory.type is MemoryType.TURN)
    return "said" if said else "recorded"


def listing_line(memory: Memory, language: str = "en") -> str:
    """One line of a listing: ``<id>  [said 2026-11-25 Wed · event 2026-10] observation: <text>``."""
    status = "" if memory.status.value == "active" else f" ({memory.status.value})"
    return f"{memory.id}  [{when_label(memory, language)}] {memory.type.value}{status}: {memory.content}"


def when_label(memory: Memory, language: str = "en") -> str:
    """"said 2026-11-25 Wed · event 2026-10" (see the module docstring)."""
    labels = _LABELS["zh" if str(language).lower().startswith("zh") else "en"]
    text = f"{labels[said_label(memory)]} {format_memory_time(memory.created_at, language)}"
    if memory.event_start is None:
        return text
    if memory.event_end is None and memory.metadata.get("event_time_kind") == "start":
        return f"{text}{SEPARATOR}{labels['since']} {event_text(memory.event_start, None, language)}"
    label = labels["mentions"] if memory.type is MemoryType.TURN else labels["event"]
    return f"{text}{SEPARATOR}{label} {event_text(memory.event_start, memory.event_end, language)}"
