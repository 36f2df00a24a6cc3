"""The person parts of an extraction answer: the entities a message names, and profile values.

Per message entry the model may list ``"entities": [{"name", "kind", "alias_of"}]`` (the people,
places, organisations, pets, objects and topics the message names) and per observation an optional
``"profile": {"key", "value"}``. Both are extras: whatever the model does with them (leaves them
out, writes null, a string instead of a list, unknown kinds, names the message does not hold,
the same name forty times, a paragraph as a name) never changes which messages the answer gives a
verdict on; what cannot be used is dropped, nothing is guessed. A name written with the relation
it was said with is the name (表妹小林 is 小林, "my sister Ruth" is Ruth: `person.relations`).

This module only parses: it touches neither the store nor the model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..person.relations import without_relation
from ..types import EntityKind

# what the model may answer: every kind but `unknown`, which says only that no model typed a name yet
ENTITY_KINDS = tuple(kind.value for kind in EntityKind if kind is not EntityKind.UNKNOWN)
MAX_ENTITIES_PER_MESSAGE = 8
MAX_NAME_CHARS = 60
MAX_NAME_WORDS = 6
MAX_KEY_CHARS = 40
MAX_VALUE_CHARS = 160
# what small models write instead of the kinds asked for
KIND_SYNONYMS = {
    "people": "person", "human": "person", "friend": "person", "family": "person", "name": "person",
    "人": "person", "人物": "person",
    "location": "place", "city": "place", "country": "place", "town": "place", "gpe": "place", "地点": "place",
    "地方": "place", "城市": "place",
    "organisation": "organization", "org": "organization", "company": "organization", "school": "organization",
    "组织": "organization", "公司": "organization", "机构": "organization",
    "animal": "pet", "dog": "pet", "cat": "pet", "宠物": "pet",
    "thing": "object", "item": "object", "product": "object", "物品": "object", "东西": "object",
    "activity": "topic", "hobby": "topic", "subject": "topic", "event": "topic", "话题": "topic", "主题": "topic",
}
_SPACES = re.compile(r"\s+")
_SPLIT = re.compile(r"\s*[,;，；、]\s*")
_PROFILE_PAIR = re.compile(r"^\s*([^:=：]{1,40}?)\s*[:=：]\s*(.+?)\s*$", re.S)


@dataclass(slots=True, frozen=True)
class NamedEntity:
    """An entity a message names, as the model proposed it (name checked against the message)."""

    name: str
    kind: str  # one of ENTITY_KINDS
    alias_of: str | None
    message: int  # 0-based index into the batch's numbered messages


@dataclass(slots=True)
class EntityParse:
    """The usable entities of one entry, and how many proposals were dropped."""

    entities: list[NamedEntity]
    dropped: int = 0


def fold(text: str) -> str:
    """Text as names are compared here: NFKC, case folded, spacing folded."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def names_in(name: str, folded_text: str) -> bool:
    """Whether ``folded_text`` (see `fold`) holds ``name``: Latin names as whole words ("Al" is
    not in "also"), others (Chinese) as a substring."""
    wanted = fold(name)
    if not wanted:
        return False
    pattern = rf"(?<![a-z0-9]){re.escape(wanted)}(?![a-z0-9])"
    return re.search(pattern, folded_text) is not None


def _clean_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    name = _SPACES.sub(" ", unicodedata.normalize("NFKC", value)).strip().strip("\"'“”‘’「」《》.,!?;:。，！？")
    name = without_relation(name)  # 表妹小林 -> 小林, "my sister Ruth" -> "Ruth"
    if not name or len(name) > MAX_NAME_CHARS or len(name.split(" ")) > MAX_NAME_WORDS:
        return None
    if name.casefold() in ("null", "none", "n/a", "user", "assistant", "i", "me", "我"):
        return None
    return name


def entity_kind(value: Any) -> str:
    """The kind asked for, a known synonym of it, else "topic"."""
    if not isinstance(value, str):
        return EntityKind.TOPIC.value
    text = fold(value).replace("-", "_").replace(" ", "_")
    if text in ENTITY_KINDS:
        return text
    return KIND_SYNONYMS.get(text, EntityKind.TOPIC.value)


def _items(value: Any) -> list[Any]:
    """The entity proposals of an entry, whatever container the model used."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, str):  # "Ruth, Leeds" instead of a list
        return [part for part in _SPLIT.split(value) if part.strip()]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return value
    return []


def parse_entities(value: Any, message_text: str, index: int) -> EntityParse:
    """The entities an entry's ``entities`` value proposes that its message really names.

    A name the message does not contain is dropped (the model invents nothing into the ledger);
    so are empty and oversized names and repeats; at most `MAX_ENTITIES_PER_MESSAGE` are kept.
    Unknown kinds become "topic"; ``alias_of`` is kept when it is a usable name other than the
    name itself (whether it names a known entity is decided when the ledger is planned).
    """
    said = fold(message_text)
    out: list[NamedEntity] = []
    seen: set[str] = set()
    dropped = 0
    for item in _items(value):
        raw = item if isinstance(item, dict) else {"name": item}
        name = _clean_name(raw.get("name"))
        if name is None or not names_in(name, said) or fold(name) in seen or len(out) >= MAX_ENTITIES_PER_MESSAGE:
            dropped += 1
            continue
        seen.add(fold(name))
        alias_of = _clean_name(raw.get("alias_of"))
        if alias_of is not None and fold(alias_of) == fold(name):
            alias_of = None
        out.append(NamedEntity(name=name, kind=entity_kind(raw.get("kind")), alias_of=alias_of, message=index))
    return EntityParse(out, dropped)


def parse_profile(value: Any) -> tuple[str, str] | None:
    """An observation's ``profile`` as ``(key, value)``, or None when there is no usable one.

    Accepts ``{"key": k, "value": v}``, the one-pair shortcut ``{"home": "Leeds"}``, the string
    ``"home: Leeds"`` and a list of these (its first usable one). The key is returned as written
    (normalising it to the profile's keys is the profile's job)."""
    if isinstance(value, list):
        for item in value[:3]:
            found = parse_profile(item)
            if found is not None:
                return found
        return None
    key: Any = None
    text: Any = None
    if isinstance(value, dict):
        if "key" in value or "value" in value:
            key, text = value.get("key"), value.get("value")
        elif len(value) == 1:
            (key, text), = value.items()
    elif isinstance(value, str):
        match = _PROFILE_PAIR.match(value)
        if match is not None:
            key, text = match.group(1), match.group(2)
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(key, str) or not isinstance(text, str):
        return None
    key, text = _SPACES.sub(" ", key).strip(), _SPACES.sub(" ", text).strip()
    if not key or not text or len(key) > MAX_KEY_CHARS or len(text) > MAX_VALUE_CHARS:
        return None
    if text.casefold() in ("null", "none", "n/a", "unknown", "未知", "无"):
        return None
    return key, text
