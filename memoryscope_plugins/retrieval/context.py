"""The ready-to-inject context string: one line per memory, dated, in the user's language."""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from ..types import Memory, MemoryType, ScoredMemory
from .time_format import format_memory_time, format_time_span

HEADERS = {
    "en": "Relevant memories about the user (oldest first):",
    "zh": "关于用户的相关记忆（按时间先后）：",
}


def memory_line(item: ScoredMemory, language: str = "en", *, with_time: bool = False) -> str:
    """"[2023-05-08 Mon] Caroline: I went to ..." — the event time when known (a turn: when it was
    said), else the message time."""
    memory = item.memory
    if memory.event_start is not None and _dated_by_event(memory):
        when = format_time_span(memory.event_start, memory.event_end, language)
    else:
        when = format_memory_time(memory.created_at, language, with_time=with_time)
    text = memory.content
    if memory.type is MemoryType.TURN and memory.speaker:
        text = f"{memory.speaker}: {text}"
    return f"[{when}] {text}"


def format_context(items: Sequence[ScoredMemory], language: str = "en", *, with_time: bool = False,
                   header: bool = True) -> str:
    """The memories as dated lines in time order (an LLM reads a timeline best); empty when none."""
    if not items:
        return ""
    ordered = sorted(items, key=lambda s: _timeline_moment(s.memory).timestamp())
    lines = [memory_line(item, language, with_time=with_time) for item in ordered]
    if header:
        lines.insert(0, HEADERS.get(language, HEADERS["en"]))
    return "\n".join(lines)


def _timeline_moment(memory: Memory) -> datetime:
    if memory.event_start is not None and _dated_by_event(memory):
        return memory.event_start
    return memory.created_at


def _dated_by_event(memory: Memory) -> bool:
    """A memory is placed at its event time, except a turn: its own words ("yesterday", "上周六")
    are relative to when it was said."""
    return memory.event_start is not None and memory.type is not MemoryType.TURN
