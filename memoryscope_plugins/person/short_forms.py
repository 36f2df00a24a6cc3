"""Short forms a speaker is called by ("Mel" for Melanie), linked only where the text links them.

A conversation's speakers are known from the messages' names, never guessed. When a message
*addresses* someone by a capitalised word of at least `MIN_SHORT_FORM` letters ("Hey Mel!", "Nice
one, Mel!", "Mel, look") and exactly one speaker's first name begins with that word, the word is
that speaker's short form: `record` adds it as the speaker's alias (`addressed_aliases`) and
consolidation takes the model's "Mel" for her (`person.ledger`). A word that only names someone
("my friend Mel"), one that a speaker goes by in full, one that two speakers' names begin with
(Melanie, Melissa) or one the ledger already holds is left alone.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Iterable, Sequence

from ..types import Entity
from .matching import entity_list, normalise_name

#: The shortest short form linked to a speaker, in letters ("Mo" for Monica is too short to tell).
MIN_SHORT_FORM = 3
WORD = re.compile(r"[A-Z][a-z]{2,}")
_GREETING = r"(?:hey|hi|hello|thanks|thank you|bye|goodbye|oh|wow|yes|yeah|no|congrats|congratulations|dear|sorry)"


def addressed(word: str, text: str) -> bool:
    """Whether `text` calls someone `word` (a vocative: "Hey Mel!", "Nice one, Mel!", "Mel, look"),
    not only names them ("my friend Mel", "I saw Mel.")."""
    name = re.escape(word)
    return re.search(rf"(?:^|[,!.?;:]\s*|\b{_GREETING}\s*,?\s+){name}(?=\s*(?:[,!.?;:]|$))", text,
                     re.IGNORECASE | re.MULTILINE) is not None


def short_form_owner(word: str, names: Iterable[str]) -> str | None:
    """The one name of `names` whose first word begins with `word` and is longer ("Melanie" for
    "Mel"); None when none or several do, when one of them is `word` itself, or when `word` is not a
    capitalised word of at least `MIN_SHORT_FORM` letters."""
    if not WORD.fullmatch(word):
        return None
    short = normalise_name(word)
    owners = []
    for name in names:
        first = normalise_name(name).split(" ")[0]
        if first == short:
            return None  # someone goes by it in full
        if first.startswith(short):
            owners.append(name)
    return owners[0] if len(owners) == 1 else None


def addressed_aliases(entities: Iterable[Entity], said: Sequence[tuple[str | None, str]],
                      now: datetime) -> list[Entity]:
    """The speakers among `entities` (those recording made from a named speaker:
    ``metadata["speaker_role"]``) that gain an alias from `said` (``(author's name, text)`` pairs):
    a short form a message addresses them by, not said by themselves and not yet a name of any
    entity. Returns the changed entities (a new alias each, `updated_at` = `now`), each once; the
    inputs are not modified. Raises TypeError on wrong types."""
    listed = entity_list(entities)
    speakers = {entity.name: entity for entity in listed if "speaker_role" in entity.metadata}
    candidates: list[tuple[str | None, str]] = []
    for author, text in said:
        if not isinstance(text, str) or (author is not None and not isinstance(author, str)):
            raise TypeError("said must hold (author name or None, text) pairs of str")
        candidates += [(author, word) for word in dict.fromkeys(WORD.findall(text)) if addressed(word, text)]
    if not speakers or not candidates:
        return []
    taken = {normalise_name(name) for entity in listed for name in entity.names}
    changed: dict[str, Entity] = {}
    for author, word in candidates:
        owner = short_form_owner(word, speakers)
        if normalise_name(word) in taken or owner is None or normalise_name(owner) == normalise_name(author or ""):
            continue  # a known name, nobody's short form, or a speaker calling themself so
        entity = changed.get(speakers[owner].id, speakers[owner])
        changed[entity.id] = dataclasses.replace(entity, aliases=[*entity.aliases, word], updated_at=now)
        taken.add(normalise_name(word))
    return list(changed.values())
