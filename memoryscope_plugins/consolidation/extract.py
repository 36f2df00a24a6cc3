"""The extraction call: new messages (in context) -> observations, one verdict per user message.

The user's new messages are numbered; the assistant's stand between them, unnumbered, as context
(its suggestions are never the user's facts). The model answers with one entry per numbered
message, in order, ``{"n": 2, "says": "<the message's first words>", "observations": [...],
"entities": [...]}``, with an empty list when a message holds nothing worth keeping; the entities
the message names and an observation's optional ``profile`` value feed the entity ledger and the
profile (`ledger_answer`: extras that never decide a verdict). That entry is the model's verdict
on the message: a message without one is not accounted for and is never marked done.

``says`` anchors each entry to its message: a schema-constrained endpoint is made to write it
exactly (so the model reads the message again right before writing its observations), and where
the schema is not enforced, an entry whose ``says`` quotes another numbered message is moved to
it. The source of each observation is the message its entry belongs to, so who said it comes from
that message, never from a number the model wrote. Existing memories are not shown here: repeats
and contradictions are found by the engine and put to the model as small questions (`judge`).

This module only renders and parses: it touches neither the store nor the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..storage.base import StoredMessage
from ..timeparse import format_memory_time, format_time_span
from ..types import Memory
from .ledger_answer import ENTITY_KINDS, MAX_ENTITIES_PER_MESSAGE, NamedEntity, parse_entities, parse_profile
from .prompts import PromptSet

KINDS = ("fact", "preference", "plan", "relation", "event")
REALITIES = ("real", "hypothetical", "fiction")
MAX_OBSERVATIONS_PER_MESSAGE = 6
OPENING_WORDS = 6
ZH_OPENING_CHARS = 10
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LABEL_RE = re.compile(r"^\s*\[?\s*([A-Za-z#])\s*(\d{1,9})\s*\]?\s*$")
_SPACES = re.compile(r"\s+")


class ExtractionError(ValueError):
    """The model's answer is JSON but not in the shape the prompt asked for."""


@dataclass(slots=True)
class Extracted:
    """One observation proposed by the model for one message of the batch."""

    content: str
    message: int  # 0-based index into the batch: the message whose entry holds it
    about: str | None = None
    kind: str = "fact"
    reality: str = "real"
    time: str | None = None
    date: str | None = None
    importance: int = 2
    profile: tuple[str, str] | None = None  # (key, value) the model proposes for the user's profile


@dataclass(slots=True)
class Extraction:
    """The usable part of an answer: the messages it gives a verdict on, their observations and
    the entities they name."""

    accounted: set[int] = field(default_factory=set)  # 0-based batch indexes with a verdict
    items: list[Extracted] = field(default_factory=list)
    entities: list[NamedEntity] = field(default_factory=list)  # of accounted messages only
    dropped_entities: int = 0  # proposals not used (not in the message, oversized, repeated, ...)
    repeated_items: int = 0  # identical observations dropped (a looping answer)
    complete: bool = True  # False: salvaged from an answer cut off at the token cap


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


def opening(text: str, language: str) -> str:
    """The first words of a message, as the model is asked to quote them in ``says``."""
    flat = _SPACES.sub(" ", text).strip()
    if language == "zh" or _CJK_RE.search(flat[:12]):
        return flat[:ZH_OPENING_CHARS]
    return " ".join(flat.split(" ")[:OPENING_WORDS])


def render(prompt: PromptSet, *, user: str, agent: str, context: Sequence[StoredMessage],
           batch: Sequence[StoredMessage], numbered: Sequence[StoredMessage]) -> list[dict[str, str]]:
    """The chat messages of one extraction call: ``batch`` in order, the messages of ``numbered``
    with their number. Content is shown in full, never cut."""
    language = prompt.language
    none = prompt.text("none", "(none)")
    context_text = "\n".join(_message_line(m, language) for m in context) or none
    numbers = {m.id: i for i, m in enumerate(numbered, start=1)}
    lines = []
    for stored in batch:
        number = numbers.get(stored.id)
        prefix = f"#{number} " if number is not None else "   "
        lines.append(prefix + _message_line(stored, language))
    return prompt.messages(user=user, agent=agent, context=context_text, messages="\n".join(lines),
                           count=str(len(numbered)))


def answer_schema(numbered: Sequence[StoredMessage], language: str) -> dict[str, Any]:
    """The JSON schema of an extraction answer: exactly one entry per numbered message, in order,
    each with its number and opening words fixed, and a bounded list of observations (so a
    schema-constrained endpoint can neither skip a message nor loop past the bound)."""
    nullable = {"type": ["string", "null"]}
    observation = {
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "about": nullable,
            "kind": {"type": "string", "enum": list(KINDS)},
            "reality": {"type": "string", "enum": list(REALITIES)},
            "time": nullable,
            "date": nullable,
            "importance": {"type": "integer", "enum": [1, 2, 3]},
            "profile": {"type": ["object", "null"],
                        "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                        "required": ["key", "value"]},
        },
        "required": ["content", "about", "kind", "reality", "time", "date", "importance"],
    }
    observations = {"type": "array", "items": observation, "maxItems": MAX_OBSERVATIONS_PER_MESSAGE}
    entity = {"type": "object",
              "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": list(ENTITY_KINDS)},
                             "alias_of": nullable},
              "required": ["name", "kind"]}
    entities = {"type": "array", "items": entity, "maxItems": MAX_ENTITIES_PER_MESSAGE}
    entries = [{"type": "object",
                "properties": {"n": {"const": number}, "says": {"const": opening(stored.message.content, language)},
                               "observations": observations, "entities": entities},
                "required": ["n", "says", "observations", "entities"]}
               for number, stored in enumerate(numbered, start=1)]
    return {
        "type": "object",
        "properties": {"messages": {"type": "array", "prefixItems": entries, "minItems": len(entries),
                                    "maxItems": len(entries)}},
        "required": ["messages"],
    }


def label_index(label: Any, prefix: str, count: int) -> int | None:
    """``"M2"`` (or ``"[M2]"``, ``"m2"``, ``2``, ``"#2"``) -> 1, when 1 <= 2 <= count; None otherwise."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        number = label
    elif isinstance(label, str):
        match = _LABEL_RE.match(label)
        if match is None:
            text = label.strip().strip("[]#() ")
            if not text.isascii() or not text.isdigit() or len(text) > 9:  # "²" is a digit int() refuses
                return None
            number = int(text)
        else:
            if match.group(1).upper() != prefix.upper() and match.group(1) != "#":
                return None
            number = int(match.group(2))
    else:
        return None
    return number - 1 if 1 <= number <= count else None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
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


def parse_extraction(value: Any, numbered: Sequence[StoredMessage], *, complete: bool = True,
                     language: str = "en") -> Extraction:
    """Validate the model's answer: which numbered messages it gives a verdict on, and their
    observations.

    An entry counts as a verdict when its ``observations`` is a list and it names a numbered
    message: by its ``says`` when that quotes a message's opening, else by its number. A second
    entry for the same message is ignored. Malformed observations inside a good entry are dropped
    (the verdict stands); so are unusable entities and profile values (`ledger_answer`): they
    never decide whether an entry is a verdict.

    Raises:
        ExtractionError: the answer has no ``messages`` list at all.
    """
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        raise ExtractionError("the answer has no 'messages' list")
    openings = [_fold(opening(m.message.content, language)) for m in numbered]
    result = Extraction(complete=complete)
    for raw in value["messages"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("observations"), list):
            continue
        index = _entry_index(raw, openings)
        if index is None or index in result.accounted:
            continue
        result.accounted.add(index)
        named = parse_entities(_entities_of(raw), numbered[index].message.content, index)
        result.entities.extend(named.entities)
        result.dropped_entities += named.dropped
        seen: set[str] = set()
        for item in raw["observations"]:
            extracted = _observation(item, index)
            if extracted is None:
                continue
            key = normalise(extracted.content)
            if key in seen:
                result.repeated_items += 1
                continue
            seen.add(key)
            if len(seen) <= MAX_OBSERVATIONS_PER_MESSAGE:
                result.items.append(extracted)
            else:
                result.repeated_items += 1
    return result


def _entities_of(raw: dict[str, Any]) -> Any:
    """An entry's ``entities``; when it has none, those a small model wrote inside its
    observations instead."""
    value = raw.get("entities")
    if value is not None:
        return value
    misplaced = [item.get("entities") for item in raw["observations"] if isinstance(item, dict)]
    return [entity for group in misplaced if isinstance(group, list) for entity in group]


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text.casefold()).strip().strip(".,!?;:。，！？")


def _entry_index(raw: dict[str, Any], openings: Sequence[str]) -> int | None:
    """The numbered message an entry is about (0-based), by its quote first, else its number."""
    says = raw.get("says")
    if isinstance(says, str) and says.strip():
        quoted = _fold(says)
        found = [i for i, text in enumerate(openings) if text and (quoted.startswith(text) or text.startswith(quoted))]
        if len(found) == 1:
            return found[0]
    return label_index(raw.get("n"), "#", len(openings))


def _observation(raw: Any, index: int) -> Extracted | None:
    if not isinstance(raw, dict):
        return None
    content = _text(raw.get("content"))
    if content is None:
        return None
    try:
        importance = min(3, max(1, int(raw.get("importance", 2))))
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 is valid JSON (infinity)
        importance = 2
    return Extracted(content=content, message=index, about=_text(raw.get("about")),
                     kind=_choice(raw.get("kind"), KINDS, "fact"),
                     reality=_choice(raw.get("reality"), REALITIES, "real"),
                     time=_text(raw.get("time")), date=_text(raw.get("date")), importance=importance,
                     profile=parse_profile(raw.get("profile")))


def salvage_entries(text: str) -> dict[str, Any] | None:
    """The complete entries of a ``{"messages": [...]`` answer that was cut off.

    Only whole JSON values are kept (each entry parsed by itself); the entry the cut fell in is
    dropped, never guessed. None when not even the start of the list is there.
    """
    if not isinstance(text, str):
        return None
    match = re.search(r'"messages"\s*:\s*\[', text)
    if match is None:
        return None
    decoder = json.JSONDecoder()
    position, entries = match.end(), []
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            break
        try:
            entry, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            break  # the cut-off entry
        entries.append(entry)
    return {"messages": entries}


def normalise(text: str) -> str:
    """Text for repeat detection only (case and spacing folded, final punctuation dropped)."""
    return _SPACES.sub(" ", text.casefold()).strip().rstrip(".。!！")
