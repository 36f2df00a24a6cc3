"""The entity ledger's rules: which entities a batch adds, which memories mention them, merging,
renaming, ranking and the timeline. Pure functions over the records of `types`: no store, no model.

- Mentions at record time (`record_mentions`): a new turn names a known entity when the matcher
  finds one of its names (`matching`); each turn counts once per entity (`counted=True`); observations
  and insights link as evidence (`counted=False`), they repeat what a turn said. A turn never
  mentions its own speaker (the entity the speaker's name is a name of).
- New entities (`plan_new_entities`) come from what consolidation's answer proposes, checked: a name
  the message does not contain is invented and dropped (quotes, brackets and an English possessive
  around a name are taken off first: "“Mel's”" is Mel, and an English phrase the message writes as a
  proper name with common nouns after it is that name: "Harry Potter fan" is Harry Potter,
  `written_case`); a name shorter than 2 characters, longer
  than `MAX_NAME_CHARS`, holding a character `name_rules` refuses (a control or format character such
  as a bidi override), a pronoun or a function word is dropped, and so is a new English name
  written in lower case only ("kids", "mental health": a common noun, not a name; "Adoption
  agencies" too where the message, which writes capitals, says "adoption agencies") unless the
  ledger or the batch already has it as a proper name ("mel" after "Mel"); names are compared normalised, so
  "Mel" proposed twice, or "mel" when "Mel" is known, is one entity; `alias_of` a known entity adds
  the name as its alias (小王 for 王磊); a kind the ledger does not know is a topic, a topic
  becomes a person, place... when a later proposal says so, and an `unknown` entity (a name `record`
  found without a model: `record_names`) takes whatever kind a proposal gives it. A new entity's id is derived from the
  user and its normalised name, so a batch consolidated twice proposes the same ids.
- Merging keeps one entity, gives it the other's names as aliases and its mentions (and the other's
  kind when that is more specific: `more_specific`), and removes the other (never a memory).
  Renaming keeps the old name as an alias.
- Ranking (`rank`): "frequency" is the mention count; "recency" the last mention; "relevance" both,
  as Memary ranks its entity knowledge store: ``ln(1 + mentions) * (FLOOR + (1 - FLOOR) *
  0.5 ** (days since the last mention / HALF_LIFE_DAYS))`` with FLOOR 0.25 and a 30-day half-life:
  frequency counts, and an entity not mentioned for months keeps a quarter of its weight. Ties go
  by normalised name, then id.
- The timeline counts counted mentions per week (starting Monday) or month, by the time said, in
  UTC; periods without a mention are left out.
"""

from __future__ import annotations

import dataclasses
import math
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Literal, Sequence

from ..storage.base import LedgerChanges
from ..storage.text_analysis import CJK
from ..types import Entity, EntityKind, EntityMention, Memory, MemoryType, as_aware, utc_now
from .matching import MAX_NAME_CHARS, NameMatcher, entity_list, is_function_word, normalise_name, said_in, usable_name
from .name_rules import holds_problem, new_name_problem
from .relations import relation_or_role
from .short_forms import addressed, short_form_candidates, short_form_owner
from .written_case import named_head, written_in_lower_case

#: Relevance keeps this share of an entity's frequency weight however long ago it was mentioned.
RELEVANCE_FLOOR = 0.25
#: Days after which an entity's recency weight is halved, in the relevance order.
HALF_LIFE_DAYS = 30.0

_KINDS = {kind.value: kind for kind in EntityKind} | {
    "people": EntityKind.PERSON, "human": EntityKind.PERSON, "人": EntityKind.PERSON, "人物": EntityKind.PERSON,
    "location": EntityKind.PLACE, "city": EntityKind.PLACE, "country": EntityKind.PLACE, "地点": EntityKind.PLACE,
    "地方": EntityKind.PLACE, "organisation": EntityKind.ORGANIZATION, "org": EntityKind.ORGANIZATION,
    "company": EntityKind.ORGANIZATION, "组织": EntityKind.ORGANIZATION, "公司": EntityKind.ORGANIZATION,
    "机构": EntityKind.ORGANIZATION, "animal": EntityKind.PET, "宠物": EntityKind.PET, "thing": EntityKind.OBJECT,
    "item": EntityKind.OBJECT, "物品": EntityKind.OBJECT, "东西": EntityKind.OBJECT, "话题": EntityKind.TOPIC,
    "主题": EntityKind.TOPIC,
}
_NOT_ENTITIES = frozenset({"user", "assistant", "用户", "助手", "i", "me", "you", "我", "你"})


@dataclass(frozen=True, slots=True)
class ProposedEntity:
    """An entity consolidation's answer proposes for one message of the batch: its `name` as the
    message writes it, its `kind` (an `EntityKind` or its name; anything else is a topic), the name
    of the entity it is another name of (`alias_of`, or None) and the batch's index of the message
    (`message_index`, into `plan_new_entities`'s `texts`)."""

    name: str
    kind: EntityKind | str = EntityKind.TOPIC
    alias_of: str | None = None
    message_index: int = 0


def more_specific(current: EntityKind, proposed: EntityKind) -> EntityKind:
    """The kind an entity of kind `current` takes when something says it is `proposed`: an unknown
    entity takes any kind, a topic any kind but unknown, and a person, place... keeps its own."""
    rank = {EntityKind.UNKNOWN: 0, EntityKind.TOPIC: 1}
    return proposed if rank.get(proposed, 2) > rank.get(current, 2) else current


def entity_kind(kind: object) -> EntityKind:
    """The `EntityKind` a proposal's kind means ("Person", "location", "组织"...); a topic when it
    is not a kind the ledger knows."""
    if isinstance(kind, EntityKind):
        return kind
    if isinstance(kind, str):
        return _KINDS.get(normalise_name(kind[:40]), EntityKind.TOPIC)
    return EntityKind.TOPIC


def record_mentions(entities: Iterable[Entity] | NameMatcher, memories: Iterable[Memory]) -> list[EntityMention]:
    """The mentions of known entities in `memories`: one per (entity, memory) whose content names
    the entity, except the turn's own speaker (a speaker naming themself, "Hi, I'm Caroline" said
    by Caroline, is not a mention of them). Turns and memories added by hand count (`counted=True`);
    observations and insights are evidence only. `entities` may be a `NameMatcher` built for them
    (reuse one per user).

    Pass one user's entities (a name two users share belongs to one of them in a matcher); only
    entities of the memory's own user are linked. Raises TypeError on wrong types."""
    matcher = entities if isinstance(entities, NameMatcher) else NameMatcher(entities)
    if isinstance(memories, (str, bytes)) or not hasattr(memories, "__iter__"):
        raise TypeError(f"memories must be an iterable of Memory, got {type(memories).__name__}")
    mentions: list[EntityMention] = []
    for memory in memories:
        if not isinstance(memory, Memory):
            raise TypeError(f"memories must hold Memory records, got {type(memory).__name__}")
        speaker = _speaking_entity(matcher, memory)
        for entity_id in sorted(matcher.entities_in(memory.content)):
            if matcher.user_of(entity_id) != memory.user_id or entity_id == speaker:
                continue
            mentions.append(EntityMention(
                entity_id=entity_id, memory_id=memory.id, user_id=memory.user_id, said_at=memory.created_at,
                event_at=memory.event_start,
                counted=memory.type not in (MemoryType.OBSERVATION, MemoryType.INSIGHT)))
    return mentions


def _speaking_entity(matcher: NameMatcher, memory: Memory) -> str | None:
    """The entity a turn's speaker is (by any of its names), whose own words do not mention it:
    "Hi, I'm Caroline" said by Caroline names nobody new."""
    if memory.type is not MemoryType.TURN or not isinstance(memory.speaker, str) or not memory.speaker.strip():
        return None
    return matcher.entity_for(memory.speaker)


def _entity_id(user_id: str, name: str, taken: set[str]) -> str:
    for attempt in range(1000):
        suffix = f":{attempt}" if attempt else ""
        candidate = uuid.uuid5(uuid.NAMESPACE_URL, f"memoryscope:entity:{user_id}:{normalise_name(name)}{suffix}").hex
        if candidate not in taken:
            return candidate
    raise ValueError("no free entity id")  # pragma: no cover - 1000 uuid5 collisions


def _acceptable(name: object) -> bool:
    return (isinstance(name, str) and holds_problem(" ".join(name.split())) is None and usable_name(name)
            and not is_function_word(name)
            and normalise_name(name) not in _NOT_ENTITIES)


class _Plan:
    """The entities of one planning pass, indexed by normalised name."""

    def __init__(self, user_id: str, existing: list[Entity], now: datetime) -> None:
        self.user_id, self.now = user_id, now
        self.by_id = {entity.id: entity for entity in existing}
        self.changed: dict[str, Entity] = {}
        self.by_name: dict[str, str] = {}
        self.merged: dict[str, str] = {}  # an unknown entity's id -> the id of the entity it is now part of
        self.dropped: set[str] = set()  # unknown entities a refusal rule took out
        for entity in sorted(existing, key=lambda e: (-e.mention_count, e.id)):
            for name in entity.names:
                self.by_name.setdefault(normalise_name(name), entity.id)

    def lookup(self, name: str) -> Entity | None:
        found = self.by_name.get(normalise_name(name))
        return self.by_id[found] if found else None

    def store(self, entity: Entity) -> Entity:
        self.by_id[entity.id] = self.changed[entity.id] = entity
        for name in entity.names:
            self.by_name.setdefault(normalise_name(name), entity.id)
        return entity

    def create(self, name: str, kind: EntityKind) -> Entity:
        entity_id = _entity_id(self.user_id, name, set(self.by_id))
        return self.store(Entity(id=entity_id, user_id=self.user_id, name=" ".join(name.split()), kind=kind,
                                 created_at=self.now, updated_at=self.now))

    def merge(self, keep: Entity, other: Entity) -> Entity:
        """`other` (an unknown entity) made part of `keep`: its names become `keep`'s aliases, the
        more specific kind stays, and `other` leaves the plan (`merged`)."""
        kept = _merged(keep, other, self.now)
        self.forget(other)
        self.merged[other.id] = keep.id
        self.merged.update({old: keep.id for old, into in self.merged.items() if into == other.id})
        self.store(kept)
        for name in kept.names:
            self.by_name[normalise_name(name)] = kept.id
        return kept

    def forget(self, entity: Entity) -> None:
        """`entity` out of the plan: not written, its names free."""
        self.by_id.pop(entity.id, None)
        self.changed.pop(entity.id, None)
        self.by_name = {name: owner for name, owner in self.by_name.items() if owner != entity.id}

    def refine(self, entity: Entity, kind: EntityKind, alias: str | None) -> Entity:
        """`entity` with its kind made more specific (`more_specific`) and `alias` added, when either
        changes it."""
        new_kind = more_specific(entity.kind, kind)
        aliases = list(entity.aliases)
        if alias is not None and self.by_name.get(normalise_name(alias)) is None:
            aliases.append(" ".join(alias.split()))
        if new_kind is entity.kind and aliases == entity.aliases:
            return entity
        return self.store(dataclasses.replace(entity, kind=new_kind, aliases=aliases, updated_at=self.now))


@dataclass(frozen=True, slots=True)
class EntityPlan:
    """What a batch's proposals do to the ledger (`plan_entities`): the entities to write (new ones
    and changed ones), the entity id of each accepted proposal (by its index), the `unknown`
    entities merged into another (id -> the other's id: their mentions move there) and those a
    refusal rule dropped (ids: removed with their mentions)."""

    entities: list[Entity]
    ids: dict[int, str]
    merged: dict[str, str]
    dropped: list[str]


def plan_new_entities(user_id: str, existing: Iterable[Entity], proposals: Sequence[ProposedEntity],
                      texts: Sequence[str], now: datetime | None = None, *, speakers: Sequence[str] = (),
                      ) -> tuple[list[Entity], dict[int, str]]:
    """`plan_entities`' entities to write and accepted proposals' ids, for callers that merge and
    drop nothing (they see `unknown` entities as any other)."""
    plan = plan_entities(user_id, existing, proposals, texts, now, speakers=speakers)
    return plan.entities, plan.ids


def plan_entities(user_id: str, existing: Iterable[Entity], proposals: Sequence[ProposedEntity],
                  texts: Sequence[str], now: datetime | None = None, *, speakers: Sequence[str] = (),
                  ) -> EntityPlan:
    """The entities to write for a batch's proposals, and the entity id of each accepted proposal
    (by its index in `proposals`); the `unknown` entities merged and dropped (`EntityPlan`).

    `existing` are the user's known entities, `texts` the batch's message texts (a proposal's
    `message_index` points into them). Returned: the new entities and the existing ones that changed
    (an alias added, a topic's kind made specific), each once; the inputs are not modified. The
    rules are the module's. An `unknown` entity (a name `record` found without a model) takes the
    kind a proposal gives it, is merged into the entity a proposal says it is another name of (or
    takes that entity in), and is dropped when a proposal of its name is refused for what the name
    is (a Chinese relation or role word, 外婆) and no other proposal takes it; the rules that protect
    a name the ledger already holds protect only typed ones, except the lower-case rule: a name
    `record` found capitalised was written as a name. `speakers` are the names the conversation's
    speakers go by (known from the messages, never guessed): a proposal of a speaker's full name for
    a message that calls them by a short form ("Melanie" for "Hey Mel!") is taken with that short
    form as an alias, and so is a proposal of the short form itself when the message addresses
    someone by it ("Mel" for "Hey Mel!", the first name of one speaker only beginning with it).
    Raises TypeError on wrong types, ValueError on an empty user id."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty str")
    if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
        raise TypeError("texts must be a sequence of str")
    plan = _Plan(user_id, [e for e in entity_list(existing) if e.user_id == user_id],
                 as_aware(now) if isinstance(now, datetime) else utc_now())
    if isinstance(speakers, str) or not all(isinstance(name, str) for name in speakers):
        raise TypeError("speakers must be a sequence of str")
    known = {normalise_name(name): " ".join(name.split()) for name in speakers if _acceptable(name)}
    plain = [_headed(_cleaned(proposal), texts) for proposal in proposals]
    cleaned = [_speaker_short_form(proposal, texts, known) for proposal in plain]
    cleaned = [before if after is not before and after.name == before.name and plan.lookup(before.name) else after
               for before, after in zip(plain, cleaned)]  # a short form the ledger knows stays what it is
    short_forms = {index for index, (before, after) in enumerate(zip(plain, cleaned)) if before is not after}
    grounded = [(index, proposal) for index, proposal in enumerate(cleaned) if _grounded(proposal, texts)]
    refused = {index for index, p in grounded if CJK.search(p.name) and relation_or_role(p.name)}
    proper = {index for index, p in grounded if index not in refused and _proper(p.name, texts[p.message_index])}
    names = set(plan.by_name) | {normalise_name(p.name) for index, p in grounded if index in proper}
    typed = {name for name, owner in plan.by_name.items() if plan.by_id[owner].kind is not EntityKind.UNKNOWN}
    accepted = [(index, p) for index, p in grounded if index in proper or normalise_name(p.name) in typed
                or (index not in refused and normalise_name(p.name) in names)]
    for _, proposal in accepted:  # aliases last: their target may be proposed in the same batch
        if proposal.alias_of is None or not _acceptable(proposal.alias_of):
            _place(plan, proposal.name, entity_kind(proposal.kind), None)
    ids: dict[int, str] = {}
    for index, proposal in accepted:
        kind = entity_kind(proposal.kind)
        target = proposal.alias_of if isinstance(proposal.alias_of, str) and _acceptable(proposal.alias_of) else None
        if target is None:
            ids[index] = _place(plan, proposal.name, kind, None).id
        elif index in short_forms:  # the speaker's own name, known from the messages
            ids[index] = _place(plan, target, kind, proposal.name).id
        else:
            ids[index] = _place_alias(plan, proposal.name, target, kind, texts[proposal.message_index]).id
    taken = set(ids.values())
    for index, proposal in grounded:
        entity = plan.lookup(proposal.name) if index in refused else None
        if entity is not None and entity.kind is EntityKind.UNKNOWN and entity.id not in taken:
            plan.forget(entity)
            plan.dropped.add(entity.id)
    return EntityPlan(list(plan.changed.values()), ids, dict(plan.merged), sorted(plan.dropped))


_QUOTES = "\"'“”‘’«»「」『』《》()（）[]【】.,;:!?。，；：！？、 "
_POSSESSIVE = re.compile(r"['’]s?$")


def _clean_name(name: object) -> object:
    """A proposed name without the quotes, brackets, end punctuation and English possessive a model
    may leave on it ("“Mel's”" -> "Mel"); anything but a str as it is (rejected later). A relation
    word in front of a model's name (表妹小林) is taken off where its answer is read
    (`consolidation.ledger_answer`), not here: a speaker's name is given, and kept as it is."""
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS * 4:
        return name
    stripped = " ".join(name.split()).strip(_QUOTES)
    return _POSSESSIVE.sub("", stripped) if not CJK.search(stripped) else stripped


def _cleaned(proposal: object) -> ProposedEntity:
    if not isinstance(proposal, ProposedEntity):
        raise TypeError(f"proposals must hold ProposedEntity records, got {type(proposal).__name__}")
    return dataclasses.replace(proposal, name=_clean_name(proposal.name),  # type: ignore[arg-type]
                               alias_of=_clean_name(proposal.alias_of))  # type: ignore[arg-type]


def _headed(proposal: ProposedEntity, texts: Sequence[str]) -> ProposedEntity:
    """`proposal` named by the proper name at the head of its phrase (`written_case`: "Harry Potter
    fan" is Harry Potter). The model's kind was the phrase's ("a fan" is a person), so the head's is
    not known: a topic, made specific when a later proposal says what it is."""
    name, text = proposal.name, _message_text(proposal, texts)
    if not isinstance(name, str) or text is None:
        return proposal
    head = named_head(name, text)
    if head == name:
        return proposal
    cleaned = _clean_name(head)
    return dataclasses.replace(proposal, name=cleaned if isinstance(cleaned, str) else head, kind=EntityKind.TOPIC)


def _proper(name: str, text: str) -> bool:
    """A name written as a proper name: Chinese, or with a capital letter or a digit ("Leeds",
    "iPhone", "mini 12") both in the proposal and where the message says it (unless the message
    has no capital at all: `written_case`). An English name in lower case only ("kids", "mental
    health", or "Adoption agencies" for a message's "adoption agencies") is a common noun a small
    model takes for a topic; so is a Chinese word for a relative or a role (外婆, 我妈,
    同事, 需求方, 物理老师), but not a surname with a title (陈老师)."""
    if CJK.search(name):
        return not relation_or_role(name)
    return any(char.isupper() or char.isdigit() for char in name) and not written_in_lower_case(name, text)


def _message_text(proposal: ProposedEntity, texts: Sequence[str]) -> str | None:
    """The text of the message `proposal` points at, or None for an index a model got wrong."""
    index = proposal.message_index
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(texts):
        return None
    return texts[index]


def _grounded(proposal: ProposedEntity, texts: Sequence[str]) -> bool:
    text = _message_text(proposal, texts)
    return text is not None and _acceptable(proposal.name) and said_in(proposal.name, text)


def _addressed_speaker(proposal: ProposedEntity, text: str, speakers: dict[str, str]) -> ProposedEntity:
    """A proposed short form the message addresses a speaker by ("Mel" in "Hey Mel!": `short_forms`),
    as an alias of that speaker; any other proposal as it is."""
    name = proposal.name
    if not speakers or normalise_name(name) in speakers or not addressed(name, text):
        return proposal
    owner = short_form_owner(name, speakers.values())
    if owner is None:
        return proposal
    return dataclasses.replace(proposal, alias_of=owner, kind=EntityKind.PERSON.value)


def _speaker_short_form(proposal: ProposedEntity, texts: Sequence[str], speakers: dict[str, str]) -> ProposedEntity:
    """A proposed speaker's name the message does not hold, turned into the short form it does hold
    (`short_forms`: "Mel" for "Melanie", 陈老师 for 陈志强), as an alias of the speaker's name; a
    short form the message addresses a speaker by (`_addressed_speaker`)
    likewise; any other proposal as it is."""
    name, text = proposal.name, _message_text(proposal, texts)
    if not isinstance(name, str) or text is None:
        return proposal
    if normalise_name(name) not in speakers:
        return _addressed_speaker(proposal, text, speakers) if proposal.alias_of is None else proposal
    if said_in(name, text):
        return proposal
    full = speakers[normalise_name(name)]
    for word in short_form_candidates(text):
        if short_form_owner(word, [full]) is not None:
            return dataclasses.replace(proposal, name=word, alias_of=full, kind=EntityKind.PERSON.value)
    return proposal


def _place(plan: _Plan, name: str, kind: EntityKind, alias: str | None) -> Entity:
    """The entity known as `name` (refined with `kind` and `alias`), created when none is."""
    known = plan.lookup(name) or plan.create(name, kind)
    return plan.refine(known, kind, alias)


def _place_alias(plan: _Plan, name: str, target: str, kind: EntityKind, text: str) -> Entity:
    """The entity `name` names when the answer says it is another name of `target`: the two become
    one entity's names, unless each already belongs to a different entity (merging is the user's
    call) and neither is `unknown` (an unknown one is merged into the other, which keeps its id and
    canonical name). `target` is only created when the message says it too."""
    by_name, by_target = plan.lookup(name), plan.lookup(target)
    if by_target is not None and by_name is None:
        return plan.refine(by_target, kind, name)
    if by_name is not None and by_target is not None and by_name.id != by_target.id and (
            EntityKind.UNKNOWN in (by_name.kind, by_target.kind)):  # a name record found without a model
        keep, other = (by_target, by_name) if by_name.kind is EntityKind.UNKNOWN else (by_name, by_target)
        return plan.refine(plan.merge(keep, other), kind, None)
    if by_name is not None:
        said = by_target is None and said_in(target, text)
        return plan.refine(by_name, kind, target if said else None)
    if said_in(target, text):
        return _place(plan, target, kind, name)
    return _place(plan, name, kind, None)


def _check_entity(value: object, what: str) -> Entity:
    if not isinstance(value, Entity):
        raise TypeError(f"{what} must be an Entity, got {type(value).__name__}")
    return value


def merge(keep: Entity, other: Entity, mentions: Iterable[EntityMention], now: datetime | None = None,
          ) -> LedgerChanges:
    """The changes that merge `other` into `keep`: `keep` gains `other`'s names as aliases (and its
    kind when `keep` is only a topic), `other`'s mentions among `mentions` move to `keep` (a memory
    both mention stays one mention, counted if either was), and `other` is removed. No memory is
    touched. Raises ValueError for two users or the same entity, TypeError on wrong types."""
    keep, other = _check_entity(keep, "keep"), _check_entity(other, "other")
    if keep.user_id != other.user_id:
        raise ValueError("cannot merge entities of two users")
    if keep.id == other.id:
        raise ValueError("cannot merge an entity into itself")
    merged = _merged(keep, other, as_aware(now) if isinstance(now, datetime) else utc_now())
    moved: dict[str, EntityMention] = {}
    items = list(mentions)
    for mention in items:
        if not isinstance(mention, EntityMention):
            raise TypeError(f"mentions must hold EntityMention records, got {type(mention).__name__}")
    counted_by_keep = {m.memory_id: m.counted for m in items if m.entity_id == keep.id}
    for mention in items:
        if mention.entity_id != other.id or mention.user_id != keep.user_id:
            continue
        counted = mention.counted or counted_by_keep.get(mention.memory_id, False)
        previous = moved.get(mention.memory_id)
        moved[mention.memory_id] = dataclasses.replace(
            mention, entity_id=keep.id, counted=counted or bool(previous and previous.counted))
    return LedgerChanges(user_id=keep.user_id, entities=[merged], mentions=list(moved.values()),
                         removed_entities=[other.id])


def _merged(keep: Entity, other: Entity, now: datetime) -> Entity:
    """`keep` with `other`'s names it lacks as aliases, the more specific kind, both metadata."""
    known = {normalise_name(name) for name in keep.names}
    aliases = list(keep.aliases)
    for name in other.names:
        if normalise_name(name) not in known:
            known.add(normalise_name(name))
            aliases.append(name)
    return dataclasses.replace(keep, aliases=aliases, kind=more_specific(keep.kind, other.kind),
                               metadata={**other.metadata, **keep.metadata}, updated_at=now)


def rename(entity: Entity, new_name: str, now: datetime | None = None) -> Entity:
    """`entity` under `new_name`, its old name kept as an alias (and `new_name` no longer one).
    Raises ValueError for a name `name_rules.new_name_problem` refuses (empty, over `MAX_NAME_CHARS`,
    a control or format character, fewer than 2 letters or digits, a function word), TypeError on
    wrong types."""
    entity = _check_entity(entity, "entity")
    if not isinstance(new_name, str):
        raise TypeError(f"new_name must be a str, got {type(new_name).__name__}")
    cleaned = " ".join(new_name.split())
    problem = new_name_problem(cleaned)
    if problem is not None:
        raise ValueError(f"new_name {problem}")
    wanted = normalise_name(cleaned)
    aliases = [alias for alias in entity.aliases if normalise_name(alias) != wanted]
    if normalise_name(entity.name) != wanted:
        aliases.insert(0, entity.name)
    return dataclasses.replace(entity, name=cleaned, aliases=aliases,
                               updated_at=as_aware(now) if isinstance(now, datetime) else utc_now())


Order = Literal["relevance", "frequency", "recency"]
_EPOCH = datetime(1, 1, 1, tzinfo=timezone.utc)


def relevance(entity: Entity, now: datetime) -> float:
    """The relevance score of the module's formula: frequency weighed by recency."""
    if entity.mention_count <= 0:
        return 0.0
    if entity.last_mentioned_at is None:
        fresh = 0.0
    else:
        days = max(0.0, (as_aware(now) - as_aware(entity.last_mentioned_at)).total_seconds() / 86400)
        fresh = 0.5 ** (days / HALF_LIFE_DAYS)
    return math.log1p(entity.mention_count) * (RELEVANCE_FLOOR + (1 - RELEVANCE_FLOOR) * fresh)


def rank(entities: Iterable[Entity], order: Order = "relevance", now: datetime | None = None,
         limit: int | None = None) -> list[Entity]:
    """`entities` best first by `order` ("relevance", "frequency" or "recency"; the formula is the
    module's), ties by normalised name then id; at most `limit` of them. Deterministic.

    Raises ValueError for another order or a negative limit, TypeError on wrong types."""
    items = entity_list(entities)
    if order not in ("relevance", "frequency", "recency"):
        raise ValueError(f"order must be relevance, frequency or recency, got {order!r}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    moment = as_aware(now) if isinstance(now, datetime) else utc_now()

    def last(entity: Entity) -> float:
        return (as_aware(entity.last_mentioned_at or _EPOCH) - _EPOCH).total_seconds()

    def key(entity: Entity) -> tuple:
        tie = (normalise_name(entity.name), entity.id)
        if order == "frequency":
            return (-entity.mention_count, -last(entity), *tie)
        if order == "recency":
            return (-last(entity), -entity.mention_count, *tie)
        return (-relevance(entity, moment), -entity.mention_count, *tie)

    ranked = sorted(items, key=key)
    return ranked if limit is None else ranked[:limit]


def period_start(moment: datetime, bucket: Literal["week", "month"]) -> datetime:
    """The start of the week (Monday 00:00 UTC) or month (the 1st, 00:00 UTC) holding `moment`."""
    day = as_aware(moment).astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    if bucket == "month":
        return day.replace(day=1)
    return day - timedelta(days=day.weekday())


def timeline(mentions: Iterable[EntityMention], bucket: Literal["week", "month"] = "month",
             ) -> list[tuple[datetime, int]]:
    """How many counted mentions fall in each week or month, by the time said: (period start in
    UTC, count), oldest first, periods without a mention left out. Raises ValueError for another
    bucket, TypeError on wrong types."""
    if bucket not in ("week", "month"):
        raise ValueError(f"bucket must be week or month, got {bucket!r}")
    counts: Counter[datetime] = Counter()
    for mention in mentions:
        if not isinstance(mention, EntityMention):
            raise TypeError(f"mentions must hold EntityMention records, got {type(mention).__name__}")
        if mention.counted:
            counts[period_start(mention.said_at, bucket)] += 1
    return sorted(counts.items())
