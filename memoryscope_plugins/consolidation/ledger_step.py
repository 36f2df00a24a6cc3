"""What one consolidation step changes in the entity ledger and the profile (no LLM call).

From the extraction answer (`ledger_answer`), and for Chinese messages the place names and festivals
a dictionary knows (`person.dictionary_names`, no model), the entities the batch's messages name
(less a new topic that is only a Chinese common word, 高血压) become new entities (or aliases of
known ones) by `person.ledger.plan_entities`, which keeps only names the message text holds. The
`unknown` entities `record` made without a model (`person.record_names`) are what this step decides
on: a proposal gives one its kind, one said to be another name of an entity is merged into it (its
mentions move there: `person.merge`), and one whose name a refusal rule refuses (a relation or role
word, a Chinese common word proposed as a topic) is removed with its mentions; one no proposal names
stays unknown, and keeps counting.
Mentions link memories to entities: each of the batch's turn memories that names a known or new
entity is a *counted* mention (mentions are unique per entity and memory, so a turn counted at
`record` time is not counted twice); each observation of the step that names one is linked as
evidence, not counted; and a bounded backfill finds the user's earlier turns that already named a
new entity (the store's full-text search on its names, every hit confirmed by the name matcher).
Profile values proposed on observations that passed the step's checks go through
`person.profile.apply` with their observation as source and its event
time (else its message time) as the time they became true.

Everything is returned as one `LedgerChanges`, written by the same `commit_consolidation` call
as the step's memories (one transaction, fenced by the same lease).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Sequence

from ..person import dictionary_names, profile_cues
from ..person.ledger import EntityPlan, ProposedEntity, entity_kind, merge, plan_entities, record_mentions
from ..person.matching import NameMatcher, normalise_name
from ..person.profile import ProfileProposal, apply, normalise_key
from ..storage.base import LedgerChanges, MemoryFilter, MemoryStore, SearchRequest, StoredMessage
from ..storage.text_analysis import analyse
from ..types import Entity, EntityKind, EntityMention, Memory, MemoryType, ProfileValue, as_aware, utc_now
from .extract import Extracted, Extraction

BACKFILL_PER_NAME = 40  # earlier turns looked at per name of a new entity
BACKFILL_MAX = 200  # earlier turns linked per step at most


@dataclass(slots=True)
class Observed:
    """An observation of the step as the ledger sees it: the memory that holds it (a new one, or
    the existing one it repeats) and the item the model wrote."""

    item: Extracted
    memory: Memory
    message: str  # the text of its source message


@dataclass(slots=True)
class LedgerPlan:
    """The step's ledger changes and what they mean, for the report."""

    changes: LedgerChanges
    new_entities: list[str] = field(default_factory=list)  # "name (kind)"
    profile: list[str] = field(default_factory=list)  # "key: value" set by this step


def plan_ledger(store: MemoryStore, user_id: str, batch: Sequence[StoredMessage], minable: Sequence[StoredMessage],
                extraction: Extraction, observed: Sequence[Observed], language: str,
                user_name: str | None = None) -> LedgerPlan:
    """The ledger and profile changes of one step (see the module docstring): ``batch`` is every
    message of the step, ``minable`` its numbered ones (the extraction's message indexes),
    ``user_name`` the name observations call the user by (for `profile_cues`)."""
    now = utc_now()
    existing = list(store.entities(user_id))
    known = {e.id: e for e in existing}
    texts = [m.message.content for m in minable]
    plan, removed = _plan_entities(user_id, existing, batch, texts, extraction, now)
    planned = [e for e in plan.entities if e.id not in removed]
    entities = [e for e in {**known, **{e.id: e for e in planned}}.values() if e.id not in removed]
    mentions = _moved_mentions(store, user_id, known, {e.id: e for e in planned}, plan.merged)
    if entities:
        turns = store.get(user_id, [m.id for m in batch])  # a message and its turn share one id
        _link(mentions, NameMatcher(entities), [*turns, *(o.memory for o in observed)])
        # new entities, new aliases, and an unknown entity this step types: its earlier turns too
        renamed = {e.id: _new_names(e, _before(known.get(e.id), e)) for e in planned}
        searched = [e for e in planned if renamed[e.id]]
        if searched:
            earlier = _earlier_turns(store, user_id, [n for e in searched for n in renamed[e.id]],
                                     {t.id for t in turns})
            # every entity in the matcher, so a longer name takes its words first (华西医院 holds no 华西)
            _link(mentions, NameMatcher(entities), earlier, only={e.id for e in searched})
    values, set_now = _profile(store, user_id, observed, language, now, user_name)
    changes = LedgerChanges(user_id=user_id, entities=planned, mentions=list(mentions.values()),
                            removed_entities=sorted(removed), profile=values)
    established = [e for e in planned if e.id not in known or (
        known[e.id].kind is EntityKind.UNKNOWN and e.kind is not EntityKind.UNKNOWN)]
    return LedgerPlan(changes=changes, new_entities=[f"{e.name} ({_kind(e)})" for e in established], profile=set_now)


def _plan_entities(user_id: str, existing: Sequence[Entity], batch: Sequence[StoredMessage], texts: Sequence[str],
                   extraction: Extraction, now: datetime) -> tuple[EntityPlan, set[str]]:
    """The step's `EntityPlan` from the model's proposals and the dictionary's, and the ids of the
    entities it removes: the `unknown` ones merged into another or dropped by a refusal rule,
    `person.ledger`'s or the common-word topic one (`_common_topic`), unless a proposal took them."""
    typed_names = {normalise_name(n) for e in existing if e.kind is not EntityKind.UNKNOWN for n in e.names}
    unknown = {normalise_name(n): e.id for e in existing if e.kind is EntityKind.UNKNOWN for n in e.names}
    common = {i for i, e in enumerate(extraction.entities) if _common_topic(e.name, e.kind, typed_names)}
    proposals = [ProposedEntity(name=e.name, kind=e.kind, alias_of=e.alias_of, message_index=e.message)
                 for i, e in enumerate(extraction.entities) if i not in common]
    proposals += dictionary_names.proposals(texts)  # after the model's: its kind of a name wins
    plan = EntityPlan([], {}, {}, [])
    if proposals:
        speakers = sorted({m.message.name for m in batch if m.message.name})
        plan = plan_entities(user_id, existing, proposals, texts, now, speakers=speakers)
    refused = {unknown.get(normalise_name(extraction.entities[i].name)) for i in common} - {None}
    taken = set(plan.ids.values()) | set(plan.merged.values())
    return plan, set(plan.merged) | set(plan.dropped) | {i for i in refused if i is not None and i not in taken}


def _moved_mentions(store: MemoryStore, user_id: str, known: dict[str, Entity], planned: dict[str, Entity],
                    merged: dict[str, str]) -> dict[tuple[str, str], EntityMention]:
    """The mentions of each `unknown` entity merged into another, moved to that one (`person.merge`)."""
    moved: dict[tuple[str, str], EntityMention] = {}
    for other, keep in merged.items():
        kept = planned.get(keep) or known.get(keep)
        if kept is None or other not in known:
            continue
        changes = merge(kept, known[other], store.mentions(user_id, entity_ids=[keep, other]))
        moved.update(((m.entity_id, m.memory_id), m) for m in changes.mentions)
    return moved


def _common_topic(name: str, kind: str, known_names: set[str]) -> bool:
    """A new topic the model proposes that is only a Chinese common word (高血压, 羽毛球): what a
    lower-case English topic is to `person.ledger` ("mental health"). One the ledger knows, typed
    (`known_names`), stays; an `unknown` one of that name is dropped."""
    return (entity_kind(kind) is EntityKind.TOPIC and normalise_name(name) not in known_names
            and dictionary_names.is_common_word(name))


def _kind(entity: Entity) -> str:
    return getattr(entity.kind, "value", str(entity.kind))


def _link(mentions: dict[tuple[str, str], EntityMention], matcher: NameMatcher, memories: Iterable[Memory],
          only: set[str] | None = None) -> None:
    """A mention of each entity the matcher finds in each memory (turns count, observations are
    evidence: `record_mentions`), once per entity and memory; with ``only``, of those entities only."""
    for mention in record_mentions(matcher, memories):
        if only is None or mention.entity_id in only:
            mentions.setdefault((mention.entity_id, mention.memory_id), mention)


def _before(stored: Entity | None, planned: Entity) -> Entity | None:
    """What the ledger knew of an entity before this step, for the backfill: nothing of one new or
    of an `unknown` one it types (`record` linked its own turns only, from when it found the name)."""
    if stored is None or (stored.kind is EntityKind.UNKNOWN and planned.kind is not EntityKind.UNKNOWN):
        return None
    return stored


def _new_names(entity: Entity, before: Entity | None) -> list[str]:
    """The names an entity goes by that the ledger did not know before this step."""
    if before is None:
        return entity.names
    old = {normalise_name(name) for name in before.names}
    return [name for name in entity.names if normalise_name(name) not in old]


def _earlier_turns(store: MemoryStore, user_id: str, names: Sequence[str], skip: set[str]) -> list[Memory]:
    """The user's earlier turns the full-text search finds for ``names`` (bounded; the matcher
    then keeps only those that really say one)."""
    found: dict[str, Memory] = {}
    flt = MemoryFilter(types=(MemoryType.TURN,), statuses=None)
    for name in names:
        if len(found) >= BACKFILL_MAX:
            break
        hits = store.search(SearchRequest(user_id=user_id, text=name, vector=None, filter=flt,
                                          limit=BACKFILL_PER_NAME))
        for hit in hits:
            if hit.memory.id not in skip and hit.text_rank is not None:
                found.setdefault(hit.memory.id, hit.memory)
    return list(found.values())[:BACKFILL_MAX]


def _profile(store: MemoryStore, user_id: str, observed: Sequence[Observed], language: str,
             now: datetime, user_name: str | None = None) -> tuple[list[ProfileValue], list[str]]:
    """The profile values the step's observations propose (the model's; where it gave none, those
    the observation states in so many words: `profile_cues`), applied to the stored profile; and
    the ``"key: value"`` of the values new to it."""
    proposals: list[ProfileProposal] = []
    cued: list[ProfileProposal] = []
    for entry in observed:
        if entry.item.profile is not None:
            stated, into = [entry.item.profile], proposals
        else:
            stated, into = profile_cues.stated(entry.memory.content, entry.message, user_name, language), cued
        memory = entry.memory
        when: datetime = as_aware(memory.event_start or memory.created_at)
        for key, value in stated:
            if not _grounded(value, f"{memory.content} {entry.message}"):
                continue  # a value neither the observation nor its message says
            into.append(ProfileProposal(key=key, value=value, source_id=memory.id, at=when, language=language))
    if not proposals and not cued:
        return [], []
    stored = list(store.profile_values(user_id))
    proposals += _new_cues(cued, [(v.key, v.value) for v in stored if v.current] +
                           [(p.key, p.value) for p in proposals])
    before = {v.id for v in stored}
    values = list(apply(stored, proposals, user_id=user_id, now=now))
    return values, [f"{v.key}: {v.value}" for v in values if v.id not in before and v.current]


def _new_cues(cued: Sequence[ProfileProposal], known: Sequence[tuple[str, str]]) -> list[ProfileProposal]:
    """The values read by `profile_cues` that no current or proposed value of their key already
    says in other words ("Sofia (daughter)" beside the model's "daughter Sofia"). A value that
    negates the other is not the same ("喝酒" after "不喝酒", "drinks wine" after "doesn't drink wine")."""
    said = [(_key(key), value.casefold()) for key, value in known]
    fresh = []
    for proposal in cued:
        key, core = _key(proposal.key), profile_cues.core(proposal.value).casefold()
        if not any(k == key and (core in value or value in core)
                   and profile_cues.negated(core) == profile_cues.negated(value) for k, value in said):
            fresh.append(proposal)
            said.append((key, core))
    return fresh


def _key(key: str) -> str | None:
    try:
        return normalise_key(key)
    except (TypeError, ValueError):  # a key `apply` refuses too
        return None


def _grounded(value: str, text: str) -> bool:
    """Whether some search term of the value is a term of the text (stems, Chinese bigrams)."""
    terms = set(analyse(value))
    return bool(terms) and bool(terms & set(analyse(text)))
