"""Questions about an entity ("who is Mel?", "what do you know about Caroline?", 介绍一下王磊): the
entity's memories first, not the lines where its name is merely addressed.

Ranking by similarity to "What do you know about Caroline?" favours the lines that hold the name,
and in a conversation those are mostly lines *to* her: "Thanks, Caroline!", "Caroline, that's
great!". For a question `person.questions.entity_question` recognises, the ranked memories are
re-scored (no LLM, no second search):

- a memory about the entity, one whose mention the ledger holds where the name is not only a form
  of address, or a turn the entity said itself (a named speaker's own words), gains
  ``entity_boost``, and a little more for each of the question's other words it holds ("family" in
  "tell me about Mel's family"): the question ranked with the name taken out;
- a line that only addresses the entity (every occurrence of the name is a vocative: "Thanks, Mel!",
  "Mel, how are you?", 谢谢你，小王！, 小王好！: in Chinese as `person.short_forms` reads an address) by
  someone else keeps ``entity_address_weight`` of its score;
- the entity's mentioned memories the first hop did not find (up to ``entity_question_memories``,
  newest first) join the ranking, scored by the boost alone.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..person.matching import normalise_name
from ..person.questions import entity_question
from ..person.short_forms import chinese_vocative
from ..storage.base import MemoryFilter, MemoryStore
from ..storage.filtering import matches
from ..storage.text_analysis import CJK, STOP_WORDS, analyse, term_set
from ..types import Memory, MemoryStatus, MemoryType, ScoredMemory
from .ledger_cache import UserLedger

#: words of the question forms themselves, not of what is asked
_ASKING = frozenset("""who whom what whats know knows remember recall tell about anything everything something more
    bit information remind please do does did you me i is was us""".split())
_ZH_ASKING = re.compile("谁是|是谁|是什么人|介绍一下|介绍下|介绍|说说|讲讲|谈谈|聊聊|说一下|讲一下|关于"
                        "|了解|知道|记得|吗|多少|的|情况|你|我")
_GREETINGS = frozenset("hi hey hello thanks thank thx congrats congratulations bye dear oh wow yes no ok okay".split())
_OPENING = ",.!?;:…，。！？；：、"
_CLOSING = ",.!?;:…，。！？；：~"


def remainder_terms(query: str, names: Sequence[str]) -> list[str]:
    """The question's own words, as the full-text index analyses them, once the entity's `names`
    and the asking words are taken out: "tell me about Mel's family" -> ["famili"] (the stem of
    "family"); 介绍一下王磊的家人 -> ["家人"]."""
    text = query
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(re.escape(name), " ", text, flags=re.IGNORECASE)
    text = _ZH_ASKING.sub(" ", text)
    terms = []
    for term in analyse(text):
        if term in STOP_WORDS or term in _ASKING or term in ("s", "'s"):
            continue
        if CJK.search(term) and len(term) < 2:
            continue  # one character is no word (see ranking.relevant)
        terms.append(term)
    return list(dict.fromkeys(terms))


def _vocative(text: str, start: int, end: int) -> bool:
    if CJK.search(text[start:end]):
        return chinese_vocative(text, start, end)
    before = text[:start].rstrip()
    after = text[end:].lstrip()
    last_word = before.rsplit(None, 1)[-1].strip(_OPENING).casefold() if before else ""
    opens = not before or before[-1] in _OPENING or last_word in _GREETINGS or before.endswith(("你", "您"))
    closes = not after or after[0] in _CLOSING
    return opens and closes


def only_addressed(memory: Memory, names: Sequence[str], speaker_is_entity: bool) -> bool:
    """Whether `memory` names the entity only to address it: a line someone else said in which every
    occurrence of one of `names` is a form of address."""
    if speaker_is_entity:
        return False
    spans = []
    for name in names:
        if len(normalise_name(name)) < 2:
            continue
        flags = 0 if CJK.search(name) else re.IGNORECASE
        boundary = "" if CJK.search(name) else r"\b"
        spans += [m.span() for m in re.finditer(f"{boundary}{re.escape(name)}{boundary}", memory.content, flags)]
    return bool(spans) and all(_vocative(memory.content, start, end) for start, end in spans)


def about_entity(ranked: list[ScoredMemory], query: str, ledger: UserLedger, store: MemoryStore, *,
                 user_id: str, flt: MemoryFilter, boost: float, address_weight: float, gather: int,
                 statuses: tuple[MemoryStatus, ...] | None) -> tuple[list[ScoredMemory], str | None]:
    """`ranked` re-scored for a question about one of the ledger's entities (see the module
    docstring), best first, and that entity's id; `ranked` unchanged and None for any other question."""
    if not ledger:
        return ranked, None
    entity_id = entity_question(query, ledger.matcher)
    entity = ledger.entities.get(entity_id) if entity_id else None
    if entity is None:
        return ranked, None
    names = entity.names
    folded = {normalise_name(n) for n in names}
    terms = remainder_terms(query, names)
    mentioned = [m for m in store.mentions(user_id, entity_ids=[entity.id]) if m.user_id == user_id]
    mentioned.sort(key=lambda m: m.said_at.timestamp(), reverse=True)
    about_ids = {m.memory_id for m in mentioned}
    have = {item.memory.id for item in ranked}
    missing = [m.memory_id for m in mentioned if m.memory_id not in have][:max(gather, 0)]
    out = list(ranked)
    if missing:
        for memory in store.get(user_id, missing):
            if memory.user_id == user_id and matches(memory, flt) and (statuses is None or memory.status in statuses):
                out.append(ScoredMemory(memory.copy(), 0.0, {"entity_gathered": 1.0}))
    for item in out:
        memory = item.memory
        own = memory.type is MemoryType.TURN and normalise_name(memory.speaker or "") in folded
        if only_addressed(memory, names, own):
            item.score *= address_weight
            item.scores["entity_addressed"] = 1.0
        elif own or memory.id in about_ids:
            held = len(set(terms) & term_set(memory.content)) if terms else 0
            item.score += boost * (1.0 + 0.5 * min(held, 2))
            item.scores["entity"] = 1.0
    out.sort(key=lambda item: item.score, reverse=True)
    return out, entity.id
