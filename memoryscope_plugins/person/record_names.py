"""Names a message writes, found at `record` time without a model, for the entities the ledger does
not hold yet.

`record` links the names the ledger knows (`matching`) and makes the named speakers people; without
this module, new names came only from consolidation's model, so a store recorded without an LLM had
a ledger of its speakers only. The rules, each reading only the message:

- **English** (any Latin-script name, also one written among Chinese characters: 我用Figma画图):
  the message's own casing, `cased_names` (multi-word and mid-sentence capitals, organisation and
  place heads; never a capital that only starts a sentence, a weekday, "I", "Mom").
- **Chinese**, by jieba's dictionary (`dictionary_names.names_in`: places, organisations, districts,
  eras, languages, festivals, with their kinds; the ``multilingual`` extra), and by the words around
  a name:
  - a name right after a relation word is a person, by the rule `relations.without_relation` applies
    to a model's names (表妹小林 -> 小林, 弟弟林晓东, 我妈王芳, 同事小张: a surname with one or two
    characters, 小 / 老 / 阿 with a surname, or a titled surname; the dictionary must read the word
    after the relation as a person's name, or it must be such a nickname or title, and hold no
    numeral, so 我弟小时候 and 闺女高三 have none);
  - a name given in a naming phrase, 他叫周杰，我们都叫他阿杰，那只橘猫，叫橘子，笔名叫“牛顿的苹果”,
    我女儿叫朵朵: after 他 / 她 / 它 / 猫 / 狗 or a relation word and 叫, after 名字 / 笔名 / 网名 / 小名 /
    外号 / 昵称 and 叫 or 是, after a comma and 叫, or after 叫他 / 叫她 / 叫它; two to four characters
    ended by punctuation (or quoted, up to twelve), none of them a pronoun or a particle (他叫醒我。,
    她叫我们过去 have none). 叫我 names the speaker, whose name is given, never read: left alone. A
    person after 他 / 她 or a relation word, a pet after 猫 / 狗, else `unknown`; a second name given to
    他 / 她 in one sentence is the first one's alias (他叫周杰，我们都叫他阿杰: 阿杰 is 周杰).

A name is proposed as the message writes it (`proposals`), and `person.ledger.plan_new_entities`
checks it like a model's: it must be in the message, not a function word, not a Chinese relation
word alone. Kinds: a rule's kind where it knows one (the dictionary's place, a relation's person, a
head word's organisation), else `unknown`, for consolidation to type, merge or drop. At most
`MAX_NAMES_PER_MESSAGE` per message. Pure functions: no store, no model.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from ..types import Entity, EntityKind
from . import dictionary_names
from .cased_names import cased_names
from .ledger import ProposedEntity, plan_new_entities
from .matching import SURNAME_PATTERN, NameMatcher, entity_list, normalise_name
from .relations import ZH_RELATIONS, relation_or_role, without_relation
from .short_forms import ZH_TITLED, greeted, short_form_owner

MAX_NAMES_PER_MESSAGE = 12


class FoundName(NamedTuple):
    """A name a message writes, its kind, and the name of the entity it is another name of (国庆节
    for 国庆) or None."""

    name: str
    kind: EntityKind
    alias_of: str | None = None


_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
_OWNERS = frozenset({"我", "你", "您", "他", "她", "我们", "你们", "他们", "她们", "我的", "你的", "他的", "她的"})
_NICKNAME = re.compile(f"[小老阿]{SURNAME_PATTERN}")
_NUMERALS = frozenset("一二三四五六七八九十百千万两零〇")  # 高三, 初二: a school year, not a name
_RELATION_CUE = "|".join(sorted(ZH_RELATIONS, key=len, reverse=True))
_NAMING = re.compile(
    rf"(?:(?P<subject>[他她它猫狗]|{_RELATION_CUE})叫做?|(?:名字|笔名|网名|小名|外号|昵称|艺名)(?:叫做?|是)"
    rf"|[，,、]\s*叫做?|叫做?(?P<object>[他她它]))"
    r"(?:[“「『\"](?P<quoted>[^”」』\"\n]{2,12})[”」』\"]"
    r"|(?P<plain>[\u4e00-\u9fff]{2,4})(?=[，。！？、；：,.!?;:~～…\s]|$))")
_NAMED_KINDS = {"他": EntityKind.PERSON, "她": EntityKind.PERSON, "猫": EntityKind.PET, "狗": EntityKind.PET}
_SENTENCE_END = re.compile("[。！？!?\n]")
# characters a name given in a naming phrase never holds: pronouns, particles, 不 / 很 ...
_NOT_IN_A_NAME = frozenset("我你您他她它们的地得了着过吗呢吧啊呀哦嗯很不没太都也就还又才在去来是有这那什么怎")


def _after_relations(text: str) -> list[FoundName]:
    """Names right after a relation word (module rules), as persons."""
    words = dictionary_names.tagged_words(text)
    found = []
    for index, (word, _) in enumerate(words):
        if not _HAN.match(word) or not relation_or_role(word):
            continue
        owner = words[index - 1][0] if index and words[index - 1][0] in _OWNERS else ""
        following = words[index + 1:index + 3]
        for size in (1, 2):
            candidate = "".join(w for w, _ in following[:size])
            if len(following) < size or not 2 <= len(candidate) <= 4:
                continue
            person = following[0][1].startswith("nr") or _NICKNAME.fullmatch(candidate) or ZH_TITLED.fullmatch(
                candidate)
            if (person and not _NUMERALS.intersection(candidate)
                    and without_relation(owner + word + candidate) == candidate):
                found.append(FoundName(candidate, EntityKind.PERSON))
                break
    return found


def _named(text: str) -> list[FoundName]:
    """Names given in a naming phrase (module rules); a second name given to 他 / 她 in the same
    sentence is the first one's alias (他叫周杰，我们都叫他阿杰)."""
    found = []
    named_person: dict[int, str] = {}  # sentence -> the person it named first
    ends = [end.start() for end in _SENTENCE_END.finditer(text)]
    for match in _NAMING.finditer(text):
        name = (match.group("quoted") or match.group("plain")).strip()
        if match.group("plain") and any(char in _NOT_IN_A_NAME for char in name):
            continue
        said_by = match.group("subject") or match.group("object") or ""
        kind = _NAMED_KINDS.get(said_by, EntityKind.PERSON if said_by in ZH_RELATIONS else EntityKind.UNKNOWN)
        sentence = bisect.bisect_left(ends, match.start())
        first = named_person.get(sentence) if said_by in ("他", "她") else None
        found.append(FoundName(name, kind, first))
        if said_by in ("他", "她"):
            named_person.setdefault(sentence, name)
    return found


def names_in(text: str) -> list[FoundName]:
    """The names `text` writes by the module's rules, each once (compared normalised, the first rule's
    kind kept): the dictionary's, then those after relation words and in naming phrases, then the
    cased ones; at most `MAX_NAMES_PER_MESSAGE`. Raises TypeError for a text that is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found: list[FoundName] = []
    if _HAN.search(text):
        found += [FoundName(n.name, n.kind, n.alias_of) for n in dictionary_names.names_in(text)]
        found += _after_relations(text) + _named(text)
    found += [FoundName(n.name, n.kind) for n in cased_names(text)]
    seen: set[str] = set()
    out = []
    for name in found:
        key = normalise_name(name.name)
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out[:MAX_NAMES_PER_MESSAGE]


def new_entities(user_id: str, known: Sequence[Entity], matcher: NameMatcher, texts: Sequence[str],
                 now: datetime | None = None) -> list[Entity]:
    """The entities to create for the names `texts` write (`proposals`) that no entity of `known`
    (the user's entities, `matcher` compiled for them or for part of them) goes by, checked by
    `person.ledger.plan_new_entities`. A name `matcher` knows, a Chinese person's given name
    included, is left to it; so is a short form of a speaker's name ("Mel" for Melanie, said without
    addressing her: `short_forms`), which only addressing or consolidation makes her alias, and a
    word of a known name of several words ("Potter" once "Harry Potter" is known): which one it is,
    if any, is not written. A name the message greets or thanks ("Hey John!", "Thanks, Mel!":
    `short_forms.greeted`) is someone in the conversation, most often a speaker whose name is given
    when they speak (`record` links the turn before a new speaker's first words to them, and makes
    "Mel" Melanie's alias then). Existing entities are never changed. Raises
    TypeError on wrong types."""
    known = entity_list(known)
    if not isinstance(matcher, NameMatcher):
        raise TypeError(f"matcher must be a NameMatcher, got {type(matcher).__name__}")
    found = [p for p in proposals(texts) if matcher.entity_for(p.name) is None]
    speakers = [entity.name for entity in known if "speaker_role" in entity.metadata]
    parts = {word for entity in known for name in entity.names if " " in name.strip()
             for word in normalise_name(name).split()}
    found = [p for p in found if short_form_owner(p.name, speakers) is None and normalise_name(p.name) not in parts
             and not greeted(p.name, texts[p.message_index])]
    if not found:
        return []
    planned, _ = plan_new_entities(user_id, known, found, texts, now)
    existing = {entity.id for entity in known}
    return [entity for entity in planned if entity.id not in existing]


def proposals(texts: Sequence[str]) -> list[ProposedEntity]:
    """`names_in` each text, as ledger proposals (``message_index`` into ``texts``). Raises
    TypeError when ``texts`` is not a sequence of str."""
    if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
        raise TypeError("texts must be a sequence of str")
    return [ProposedEntity(name=name, kind=kind, alias_of=alias_of, message_index=index)
            for index, text in enumerate(texts) for name, kind, alias_of in names_in(text)]
