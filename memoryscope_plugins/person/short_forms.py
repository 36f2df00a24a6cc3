"""Short forms a speaker is called by ("Mel" for Melanie, 陈老师 for 陈志强), linked only where the
text links them.

A conversation's speakers are known from the messages' names, never guessed. When a message
*addresses* someone by a short form of exactly one speaker's name, the form is that speaker's alias:
`record` adds it (`addressed_aliases`) and consolidation takes the model's "Mel" or 陈老师 for that
speaker (`person.ledger`). The short forms:

- English: a capitalised word of at least `MIN_SHORT_FORM` letters that begins the speaker's first
  name ("Hey Mel!", "Nice one, Mel!", "Mel, look");
- Chinese: the surname of a speaker's Chinese full name with a title after it or 老 / 小 before it
  (陈老师, 王总, 老陈, 小王 for 陈志强 and 王磊), addressed as in 陈老师好！, 好的陈老师，, 晚安，老陈。
  or 谢谢你小王。

A form that only names someone ("my friend Mel", 我和陈老师), one that a speaker goes by in full, one
that two speakers' names fit (Melanie and Melissa; 陈志强 and 陈思语) or one the ledger already holds is
left alone, and so is a speaker calling themself so.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Iterable, Sequence

from ..types import Entity
from .matching import SURNAME_PATTERN, entity_list, normalise_name, surname

#: The shortest short form linked to a speaker, in letters ("Mo" for Monica is too short to tell).
MIN_SHORT_FORM = 3
WORD = re.compile(r"[A-Z][a-z]{2,}")
_GREETING = r"(?:hey|hi|hello|thanks|thank you|bye|goodbye|oh|wow|yes|yeah|no|congrats|congratulations|dear|sorry)"
# titles said after a Chinese surname (陈老师, 王总), and the prefixes said before one (老陈, 小王)
_ZH_TITLES = ("老师", "先生", "女士", "小姐", "医生", "大夫", "教授", "师傅", "老板", "经理", "主任", "校长", "阿姨",
              "总", "哥", "姐", "叔")
ZH_TITLED = re.compile(f"[老小](?P<after>{SURNAME_PATTERN})|(?P<before>{SURNAME_PATTERN})(?:{'|'.join(_ZH_TITLES)})")
_ZH_PUNCT = "，。！？；：、,.!?;:…~～"
# what a Chinese address follows at the start of a clause (好的陈老师，晚安陈老师，新年好陈老师，谢谢你小王)
_ZH_GREETING = (r"(?:你好|您好|嗨|哈喽|喂|谢谢你|谢谢您|谢谢|多谢|晚安|早安|午安"
                r"|早上好|上午好|中午好|下午好|晚上好|新年好|[\u4e00-\u9fff]{0,3}快乐"
                r"|好的|好啊|嗯|恭喜|再见|拜拜|辛苦了|亲爱的|加油)")

_ZH_OPENS = re.compile(rf"(?:^|[{_ZH_PUNCT}\s])\s*{_ZH_GREETING}?\s*$", re.MULTILINE)
_ZH_CLOSES = re.compile(rf"\s*(?:好?[{_ZH_PUNCT}]|好?$)", re.MULTILINE)


def addressed(word: str, text: str) -> bool:
    """Whether `text` calls someone `word` (a vocative: "Hey Mel!", "Nice one, Mel!", "Mel, look",
    陈老师好！, 晚安陈老师。), not only names them ("my friend Mel", "I saw Mel.", 我和陈老师去了)."""
    name = re.escape(word)
    if ZH_TITLED.fullmatch(word):
        return any(chinese_vocative(text, match.start(), match.end()) for match in re.finditer(name, text))
    return re.search(rf"(?:^|[,!.?;:]\s*|\b{_GREETING}\s*,?\s+){name}(?=\s*(?:[,!.?;:]|$))", text,
                     re.IGNORECASE | re.MULTILINE) is not None


def greeted(word: str, text: str) -> bool:
    """Whether `text` greets or thanks someone as `word` ("Hey Mel!", "Thanks, Mell!", "Wow Caroline!")
    or opens a sentence calling them so ("Mel, look!"): the narrower vocatives of `addressed`, without
    a name a sentence only ends with after a comma ("my home country, Sweden.")."""
    name = re.escape(word)
    return re.search(rf"(?:\b{_GREETING}\s*,?\s+{name}(?=\s*(?:[,!.?;:]|$))|(?:^|[.!?]\s+){name}\s*[,!])",
                     text, re.IGNORECASE | re.MULTILINE) is not None


def chinese_vocative(text: str, start: int, end: int) -> bool:
    """Whether the Chinese name at `text[start:end]` addresses someone: it opens a clause (after a
    greeting or none: 晚安陈老师。, 谢谢你，小王！) and ends it (陈老师，, 陈老师好！)."""
    # the opening is read in the few characters before the name (a greeting is short): not the whole text
    return (_ZH_OPENS.search(text, max(0, start - 24), start) is not None and _ZH_CLOSES.match(text, end) is not None)


def short_form_candidates(text: str) -> list[str]:
    """The words of `text` that may be a speaker's short form, each once, in order: capitalised
    English words ("Mel") and Chinese surnames with a title or prefix (陈老师, 老陈)."""
    return list(dict.fromkeys([*WORD.findall(text), *(match.group(0) for match in ZH_TITLED.finditer(text))]))


def short_form_owner(word: str, names: Iterable[str]) -> str | None:
    """The one name of `names` that `word` is a short form of: whose first word begins with `word` and
    is longer ("Melanie" for "Mel"), or, for a Chinese surname with a title or prefix (陈老师, 老陈), the
    one Chinese full name of that surname (陈志强). None when none or several fit, when one of them is
    `word` itself, or when `word` is neither a capitalised word of at least `MIN_SHORT_FORM` letters
    nor such a Chinese form."""
    titled = ZH_TITLED.fullmatch(word)
    if titled:
        return _titled_owner(titled, names)
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


def _titled_owner(titled: re.Match[str], names: Iterable[str]) -> str | None:
    word, family = titled.group(0), titled.group("after") or titled.group("before")
    listed = list(names)
    if any(normalise_name(name) == normalise_name(word) for name in listed):
        return None  # someone is called so in full: 小林 may be a speaker's own name
    owners = [name for name in listed if surname(name) == family]
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
        candidates += [(author, word) for word in short_form_candidates(text) if addressed(word, text)]
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
