"""The ready-to-inject context string: one line per memory, dated, in the user's language.

What a (small) answering model needs to read, measured with LoCoMo questions (docs/retrieval.md,
"The context block"):

    Today is 2023-06-10 Sat. Relevant memories, oldest first ([date] = when it was said):
    [2023-05-08 Mon] Melanie: How did the weekend go?
    [2023-05-08 Mon] Caroline: I went to a LGBTQ support group yesterday (= 2023-05-07 Sun).
    [2023-05-09 Tue] Caroline moved to Boston. (event: 2023-05-01 Mon)

- the question's own date first, so "how long ago" and "last week" in the question have an anchor;
- every line dated by when it was said, a turn with who said it by name;
- relative times in a memory's words resolved right after them (`context_times`): a small model
  copies the line's date instead of subtracting a day;
- a memory with an event time of its own (an observation) shows it labelled "event";
- the turns next to a hit (the question it answers, the reply it got) as plain lines, once each;
- for a question about the present ("where does he live now?"), a header saying that on the same
  subject a later line replaces an earlier one: the move and the home moved out of are both there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from ..timeparse import MENTIONS_KEY, format_memory_time, format_time_span, resolved_times, with_resolved_times
from ..types import Memory, MemoryType, ScoredMemory

HEADERS = {
    "en": "Relevant memories, oldest first ([date] = when it was said):",
    "zh": "相关记忆（按时间先后，[日期] 为说这句话的日期）：",
}
# for a question about the present ("where does he live now?"): both the old and the new state may be
# in the block, and a small model tends to answer with the first it reads
PRESENT_HEADERS = {
    "en": "Relevant memories, oldest first ([date] = when it was said; on the same subject a later line "
          "replaces an earlier one, so the newest is what holds now):",
    "zh": "相关记忆（按时间先后，[日期] 为说这句话的日期；同一件事以后面的为准，最新的一条就是现在的情况）：",
}
TODAY = {"en": "Today is {date}.", "zh": "今天是{date}。"}
EVENT_LABEL = {"en": " (event: {when})", "zh": "（事件时间：{when}）"}


def _zh(language: str) -> bool:
    return isinstance(language, str) and language.lower().startswith("zh")


def memory_line(item: ScoredMemory | Memory, language: str = "en", *, with_time: bool = False,
                resolve_times: bool = True) -> str:
    """"[2023-05-08 Mon] Caroline: I went to ... yesterday (= 2023-05-07 Sun).": the day it was said,
    who said it, the words with their relative times resolved (a turn), or the words and the event
    time (a memory dated by an event, such as an observation)."""
    memory = item.memory if isinstance(item, ScoredMemory) else item
    lang = "zh" if _zh(language) else "en"
    said = format_memory_time(memory.created_at, lang, with_time=with_time)
    text = memory.content
    note = ""
    if _dated_by_event(memory):
        assert memory.event_start is not None
        when = format_time_span(memory.event_start, memory.event_end, lang)
        if when != format_memory_time(memory.created_at, lang):
            note = EVENT_LABEL[lang].format(when=when)
    elif resolve_times and _may_mention_time(memory):
        pairs = resolved_times(memory.content, memory.created_at, lang, mentions=memory.metadata.get(MENTIONS_KEY))
        text = with_resolved_times(text, pairs, lang)
    if memory.type is MemoryType.TURN and memory.speaker:
        text = f"{memory.speaker}: {text}"
    return f"[{said}] {text}{note}"


def format_context(items: Sequence[ScoredMemory | Memory], language: str = "en", *, with_time: bool = False,
                   header: bool = True, now: datetime | None = None, resolve_times: bool = True,
                   present: bool = False, notes: Sequence[str] = ()) -> str:
    """The memories as dated lines in the order they were said (an LLM reads a timeline best), each
    memory once; with `now`, a first line with today's date; with `present` (the question asks how
    things are now), a header saying that a later line replaces an earlier one on the same subject;
    `notes` (`context_notes`: the profile, the entities that matter) first, as given.
    Empty when there are neither memories nor notes."""
    if not items:
        return "\n".join(notes)
    unique: dict[str, Memory] = {}
    for item in items:
        memory = item.memory if isinstance(item, ScoredMemory) else item
        unique.setdefault(memory.id, memory)
    ordered = sorted(unique.values(), key=lambda m: m.created_at.timestamp())
    lines = [memory_line(memory, language, with_time=with_time, resolve_times=resolve_times) for memory in ordered]
    if header:
        lang = "zh" if _zh(language) else "en"
        head = (PRESENT_HEADERS if present else HEADERS)[lang]
        if now is not None:
            head = f"{TODAY[lang].format(date=format_memory_time(now, lang, with_time=with_time))} {head}" \
                if lang == "en" else TODAY[lang].format(date=format_memory_time(now, lang, with_time=with_time)) + head
        lines.insert(0, head)
    lines[0:0] = notes
    return "\n".join(lines)


def _may_mention_time(memory: Memory) -> bool:
    """Whether a memory's words are worth resolving: a turn recorded by this version carries its
    resolved times (or none); an older turn is parsed when it had a mentioned time; any other
    memory without an event time is parsed."""
    if MENTIONS_KEY in memory.metadata:
        return True
    if memory.type is MemoryType.TURN:
        return memory.metadata.get("event_time_source") == "mentioned"
    return True


def _dated_by_event(memory: Memory) -> bool:
    """A memory shows its own event time, except a turn: its event time is read from its words
    ("yesterday", "上周六"), which the line resolves beside them."""
    return memory.event_start is not None and memory.type is not MemoryType.TURN
