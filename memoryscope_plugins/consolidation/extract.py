"""The extraction prompt (new messages in context + related memories) and its answer, validated.

One LLM call per batch of messages does the information filter, the observation extraction (with
the time words and the absolute date) and the comparison with related existing memories. This
module only renders and parses: it touches neither the store nor the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..retrieval.time_format import format_memory_time, format_time_span
from ..storage.base import StoredMessage
from ..types import Memory
from .prompts import PromptSet

KINDS = ("fact", "preference", "plan", "relation", "event")
REALITIES = ("real", "hypothetical", "fiction")
RELATIONS = ("new", "same", "replaces")
_LABEL_RE = re.compile(r"^\s*\[?\s*([A-Za-z])\s*(\d+)\s*\]?\s*$")
_SPACES = re.compile(r"\s+")


class ExtractionError(ValueError):
    """The model's answer is JSON but not in the shape the prompt asked for."""


@dataclass(slots=True)
class Extracted:
    """One observation proposed by the model, with its references checked."""

    content: str
    about: str | None = None
    kind: str = "fact"
    messages: list[int] = field(default_factory=list)  # 0-based indexes into the batch
    reality: str = "real"
    time: str | None = None
    date: str | None = None
    relation: str = "new"
    memory: str | None = None  # label of a related memory ("M2"), checked to exist
    importance: int = 2


def speaker_of(stored: StoredMessage) -> str:
    """The name shown for a message's author: its ``name``, else the user or agent id."""
    message = stored.message
    if message.name:
        return message.name
    return stored.user_id if message.role == "user" else stored.agent_id


def user_display_name(messages: Sequence[StoredMessage], user_id: str) -> str:
    """The name the user goes by in these messages (the most frequent ``name`` of user messages)."""
    counts: dict[str, int] = {}
    for stored in messages:
        if stored.message.role == "user" and stored.message.name:
            counts[stored.message.name] = counts.get(stored.message.name, 0) + 1
    return max(counts, key=lambda name: counts[name]) if counts else user_id


def _message_line(stored: StoredMessage, language: str) -> str:
    when = stored.message.timestamp
    stamp = format_memory_time(when, language, with_time=True) if when is not None else "?"
    return f"[{stamp}] {speaker_of(stored)}: {stored.message.content}"


def memory_date(memory: Memory, language: str) -> str:
    """The date a memory is shown with: its event time when known, else its message time."""
    if memory.event_start is not None:
        return format_time_span(memory.event_start, memory.event_end, language)
    return format_memory_time(memory.created_at, language)


def render(prompt: PromptSet, *, user: str, agent: str, context: Sequence[StoredMessage],
           batch: Sequence[StoredMessage], related: Sequence[Memory]) -> list[dict[str, str]]:
    """The chat messages of one extraction call. Content is shown in full, never cut."""
    language = prompt.language
    none = prompt.text("none", "(none)")
    context_text = "\n".join(_message_line(m, language) for m in context) or none
    batch_text = "\n".join(f"[{i}] {_message_line(m, language)}" for i, m in enumerate(batch, start=1))
    memories_text = "\n".join(f"M{i} [{memory_date(m, language)}] {m.content}"
                              for i, m in enumerate(related, start=1)) or none
    return prompt.messages(user=user, agent=agent, context=context_text, messages=batch_text,
                           memories=memories_text)


def label_index(label: Any, prefix: str, count: int) -> int | None:
    """``"M2"`` (or ``"[M2]"``, ``"m2"``, ``2``) -> 1, when 1 <= 2 <= count; None otherwise."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        number = label
    elif isinstance(label, str):
        match = _LABEL_RE.match(label)
        if match is None:
            text = label.strip().strip("[]#() ")
            if not text.isdigit():
                return None
            number = int(text)
        else:
            if match.group(1).upper() != prefix.upper():
                return None
            number = int(match.group(2))
    else:
        return None
    return number - 1 if 1 <= number <= count else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    return text if text and text.lower() not in ("null", "none", "n/a") else None


def _choice(value: Any, allowed: Sequence[str], default: str) -> str:
    text = _text(value)
    if text is None:
        return default
    text = text.lower()
    return text if text in allowed else default


def parse_extraction(value: Any, batch_size: int, related_count: int) -> list[Extracted]:
    """Validate the model's answer; keep every usable item and drop the malformed ones.

    Raises:
        ExtractionError: the answer has no ``observations`` list at all.
    """
    if not isinstance(value, dict) or not isinstance(value.get("observations"), list):
        raise ExtractionError("the answer has no 'observations' list")
    items: list[Extracted] = []
    for raw in value["observations"]:
        if not isinstance(raw, dict):
            continue
        content = _text(raw.get("content"))
        if content is None:
            continue
        messages = raw.get("messages")
        if not isinstance(messages, list):
            messages = [messages] if messages is not None else []
        indexes = sorted({i for i in (label_index(m, "#", batch_size) for m in messages) if i is not None})
        relation = _choice(raw.get("relation"), RELATIONS, "new")
        memory = None
        if relation != "new":
            index = label_index(raw.get("memory"), "M", related_count)
            if index is None:
                relation = "new"  # a reference to nothing shown is ignored, not trusted
            else:
                memory = f"M{index + 1}"
        try:
            importance = min(3, max(1, int(raw.get("importance", 2))))
        except (TypeError, ValueError):
            importance = 2
        items.append(Extracted(
            content=content, about=_text(raw.get("about")), kind=_choice(raw.get("kind"), KINDS, "fact"),
            messages=indexes, reality=_choice(raw.get("reality"), REALITIES, "real"), time=_text(raw.get("time")),
            date=_text(raw.get("date")), relation=relation, memory=memory, importance=importance))
    return items


def normalise(text: str) -> str:
    """Text for repeat detection only (case and spacing folded, final punctuation dropped)."""
    return _SPACES.sub(" ", text.casefold()).strip().rstrip(".。!！")
