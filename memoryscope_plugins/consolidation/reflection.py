"""Reflection: new observations -> insights ("subject: value") linked to what they rest on.

Due when ``consolidation.reflect_every_observations`` observations are not yet reflected on, or
when an insight rests on an observation that has since expired (or that a new observation
contradicts). One LLM call sees the new observations, related older ones, and the related
existing insights with their sources; it proposes new insights or complete rewrites of existing
ones. Locally, an insight whose subject matches an existing one updates it (no duplicates), and
insights the model lists in ``merge`` are expired with ``superseded_by`` the one they fold into.
Everything, including the "reflected" mark of the observations, is written in one transaction.
A reflection that fails (a broken or cut-off answer, an endpoint down) counts one attempt on the
observations it was about (``metadata["reflect_attempts"]``); after ``consolidation.max_attempts``
they are marked reflected without an insight (``metadata["reflect_gave_up"]``), as a message is
marked failed: the observations stay, only the insight is not made, and the pass stops asking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from ..log_hygiene import user_ref
from ..models.structured import IncompleteAnswerError
from ..storage.base import MemoryFilter
from ..types import Memory, MemoryStatus, MemoryType, utc_now
from .extract import label_index, memory_date, normalise
from .grounding import unfounded_insight
from .prompts import PromptSet, load_prompt
from .report import ConsolidationReport
from .steps import StepEnv, derived_id, embed_text, output_budget

log = logging.getLogger("memoryscope_plugins.consolidation")

SCAN_LIMIT = 500  # newest observations / insights looked at for the "reflected" marks
MAX_NEW_PER_CALL = 40


@dataclass(slots=True)
class ReflectionState:
    """A user's observations awaiting reflection and the insights that need another look."""

    unreflected: list[Memory] = field(default_factory=list)
    insights: list[Memory] = field(default_factory=list)  # active
    stale: dict[str, list[str]] = field(default_factory=dict)  # insight id -> expired source ids

    @property
    def new_active(self) -> list[Memory]:
        return [m for m in self.unreflected if m.status is MemoryStatus.ACTIVE]

    def due(self, every: int) -> bool:
        return len(self.new_active) >= every or bool(self.stale)


def load_state(env: StepEnv, user_id: str) -> ReflectionState:
    """Read what reflection needs: a bounded list of recent observations and of active insights."""
    store = env.backend.store
    observations = store.list(user_id, MemoryFilter(types=(MemoryType.OBSERVATION,), statuses=None),
                              limit=SCAN_LIMIT)
    unreflected = sorted((m for m in observations if m.metadata.get("reflected") is False),
                         key=lambda m: m.created_at)
    insights = store.list(user_id, MemoryFilter(types=(MemoryType.INSIGHT,)), limit=SCAN_LIMIT)
    source_ids = sorted({s for insight in insights for s in insight.source_ids})
    sources = {m.id: m for m in store.get(user_id, source_ids)} if source_ids else {}
    contradicted = {m.metadata.get("contradicts") for m in unreflected if m.metadata.get("contradicts")}
    stale: dict[str, list[str]] = {}
    for insight in insights:
        checked = set(insight.metadata.get("checked_expired") or [])
        expired = [s for s in insight.source_ids
                   if s in sources and sources[s].status is MemoryStatus.EXPIRED and s not in checked]
        if expired or insight.id in contradicted:
            stale[insight.id] = expired
    return ReflectionState(unreflected=unreflected, insights=insights, stale=stale)


def reflect_user(env: StepEnv, user_id: str, *, force: bool = False,
                 state: ReflectionState | None = None) -> ConsolidationReport:
    """Reflect on a user's new observations when due (or always, with ``force``)."""
    report = ConsolidationReport()
    state = state or load_state(env, user_id)
    if not force and not state.due(env.cfg.reflect_every_observations):
        report.skipped_reason = (f"reflection not due: {len(state.new_active)} new observation(s), "
                                 f"{env.cfg.reflect_every_observations} needed")
        return report
    new = state.new_active[:MAX_NEW_PER_CALL]
    done_marks = new + [m for m in state.unreflected if m.status is MemoryStatus.EXPIRED]
    stale = [m for m in state.insights if m.id in state.stale]
    if not new and not stale:
        _commit_marks(env, done_marks, [], state)
        report.skipped_reason = "nothing new to reflect on"
        return report
    backend, cfg = env.backend, env.cfg
    texts = [m.content for m in new] or [m.content for m in stale]
    insights = _unique(stale + backend.search.related(user_id, texts, types=(MemoryType.INSIGHT,),
                                                      limit=cfg.related_memories))
    new_ids = {m.id for m in new}
    older = backend.search.related(user_id, texts, types=(MemoryType.OBSERVATION,), limit=cfg.related_memories,
                                   exclude=new_ids)
    wanted = [s for m in insights for s in m.source_ids if s not in new_ids]
    known = {m.id for m in older}
    older += [m for m in backend.store.get(user_id, [s for s in dict.fromkeys(wanted) if s not in known])
              if m.type is MemoryType.OBSERVATION]
    observations = new + older
    language = env.language([m.content for m in observations + insights])
    prompt = load_prompt("reflect", language, cfg.prompts_dir)
    user_name = _user_name(observations, user_id)
    messages = _render(prompt, user_name, new, older, insights)
    value = _ask(env, user_id, messages, len(new) + len(stale), report)
    changed = _apply(env, user_id, value, prompt, observations, insights, state, report)
    _commit_marks(env, done_marks, changed, state)
    if report.rejected:
        log.warning(
            "reflection for user %s refused %d insight(s): prompt text or not founded on their sources",
            user_ref(user_id), len(report.rejected))
    return report


def count_failed_attempt(env: StepEnv, user_id: str, state: ReflectionState) -> int:
    """One failed attempt on the observations a reflection was about (the ones `reflect_user` would
    send); those that reach ``max_attempts`` are marked reflected and given up on. Returns how many
    were given up on. Written in one transaction, fenced by the lease like any step."""
    ids = [m.id for m in state.new_active[:MAX_NEW_PER_CALL]]
    # read again: a failure after the marks were set in memory must not write them
    attempted = [m for m in env.backend.store.get(user_id, ids) if m.metadata.get("reflected") is False]
    if not attempted:
        return 0
    gave_up = 0
    for memory in attempted:
        attempts = int(memory.metadata.get("reflect_attempts") or 0) + 1
        metadata = {**memory.metadata, "reflect_attempts": attempts}
        if attempts >= env.cfg.max_attempts:
            metadata.update(reflected=True, reflect_gave_up=True)
            gave_up += 1
        memory.metadata = metadata
    env.commit(user_id, attempted, [None] * len(attempted), [], anchors=[m.id for m in attempted])
    return gave_up


def _ask(env: StepEnv, user_id: str, messages: list[dict[str, str]], observations: int,
         report: ConsolidationReport) -> Any:
    """The reflection call, its answer capped like an extraction's (`output_budget`): a model that
    loops would otherwise write until its context is full (a 1.5B model took half an hour on one
    answer). An answer cut off at the cap is asked once more with twice the budget; cut off again,
    it raises, and the observations stay unreflected for a later pass."""
    try:
        return env.ask_json(user_id, "reflect", messages, ["insights"], report,
                            max_tokens=output_budget(env.cfg, observations))
    except IncompleteAnswerError:
        log.warning("reflection for user %s stopped at the token cap; asking again with a larger budget",
                    user_ref(user_id))
        return env.ask_json(user_id, "reflect", messages, ["insights"], report,
                            max_tokens=output_budget(env.cfg, observations, boost=2))


def _unique(memories: Sequence[Memory]) -> list[Memory]:
    seen: dict[str, Memory] = {}
    for memory in memories:
        seen.setdefault(memory.id, memory)
    return list(seen.values())


def _user_name(observations: Sequence[Memory], user_id: str) -> str:
    for memory in observations:
        said_by = memory.metadata.get("said_by")
        if memory.role == "user" and isinstance(said_by, str) and said_by:
            return said_by
    return user_id


def _render(prompt: PromptSet, user: str, new: Sequence[Memory], older: Sequence[Memory],
            insights: Sequence[Memory]) -> list[dict[str, str]]:
    language = prompt.language
    none = prompt.text("none", "(none)")
    gone = prompt.text("no_longer_true", "(no longer true)")
    labels = {m.id: f"O{i}" for i, m in enumerate(list(new) + list(older), start=1)}

    def line(memory: Memory) -> str:
        mark = f" {gone}" if memory.status is MemoryStatus.EXPIRED else ""
        return f"{labels[memory.id]} [{memory_date(memory, language)}] {memory.content}{mark}"

    rests_on = prompt.text("rests_on", "rests on")
    insight_lines = []
    for i, insight in enumerate(insights, start=1):
        shown = [labels[s] for s in insight.source_ids if s in labels]
        tail = f" ({rests_on} {', '.join(shown)})" if shown else ""
        insight_lines.append(f"I{i} {insight.content}{tail}")
    return prompt.messages(user=user, observations="\n".join(line(m) for m in new) or none,
                           related="\n".join(line(m) for m in older) or none,
                           insights="\n".join(insight_lines) or none)


def _apply(env: StepEnv, user_id: str, value: Any, prompt: PromptSet, observations: Sequence[Memory],
           insights: Sequence[Memory], state: ReflectionState, report: ConsolidationReport) -> list[Memory]:
    """Create / rewrite / merge insights from the model's answer; returns the changed memories."""
    items = value.get("insights") if isinstance(value, dict) else None
    if not isinstance(items, list):
        items = []
    now = utc_now()
    separator = prompt.text("subject_separator", ": ")
    by_subject = {normalise(str(m.metadata.get("subject"))): m for m in state.insights if m.metadata.get("subject")}
    changed: dict[str, Memory] = {}
    new_vectors: set[str] = set()
    created: set[str] = set()
    for index, raw in enumerate(items):
        if not isinstance(raw, dict):
            continue
        subject, text = str(raw.get("subject") or "").strip(), str(raw.get("value") or "").strip()
        sources = _labels(raw.get("sources"), "O", observations)
        if not subject or not text or not sources:
            continue
        problem = unfounded_insight(subject, text, sources, prompt)
        if problem is not None:
            report.rejected.append(f"{subject}{separator}{text} ({problem})")
            continue
        target = _labels([raw.get("update")], "I", insights)
        existing = changed.get(target[0].id, target[0]) if target else None
        if existing is None:
            existing = changed.get(getattr(by_subject.get(normalise(subject)), "id", ""),
                                   by_subject.get(normalise(subject)))
        content = f"{subject}{separator}{text}"
        source_ids = [m.id for m in sources]
        latest = max(m.created_at for m in sources if m.status is MemoryStatus.ACTIVE) \
            if any(m.status is MemoryStatus.ACTIVE for m in sources) else max(m.created_at for m in sources)
        if existing is not None and existing.status is MemoryStatus.ACTIVE and content == existing.content \
                and set(source_ids) <= set(existing.source_ids) and not raw.get("merge"):
            by_subject[normalise(subject)] = existing  # unchanged: nothing to write
            continue
        if existing is not None and existing.status is MemoryStatus.ACTIVE:
            kept = [s for s in existing.source_ids if s not in source_ids and s not in state.stale.get(existing.id, [])]
            if content != existing.content:
                existing.metadata = {**existing.metadata, "previous": existing.content}
                new_vectors.add(existing.id)
            existing.content = content
            existing.source_ids = source_ids + kept
            existing.created_at = max(existing.created_at, latest)
            existing.updated_at = now
            existing.metadata = {**existing.metadata, "subject": subject, "value": text,
                                 "revision": int(existing.metadata.get("revision", 1) or 1) + 1}
            insight = existing
        else:
            insight = Memory(id=derived_id("insight", user_id, source_ids, index), user_id=user_id,
                             agent_id=sources[0].agent_id, content=content, type=MemoryType.INSIGHT,
                             created_at=latest, updated_at=now, source_ids=source_ids,
                             metadata={"subject": subject, "value": text, "revision": 1, "origin": "reflection"})
            new_vectors.add(insight.id)
            created.add(insight.id)
        changed[insight.id] = insight
        by_subject[normalise(subject)] = insight
        _merge_into(insight, _labels(raw.get("merge"), "I", insights), changed, now, report)
        report.insights.append(content)
        report.insight_ids.append(insight.id)
    _note_checked_expired(changed, observations, insights, state)
    env.notes["reflect_vectors"] = new_vectors
    env.notes["reflect_created"] = created
    return list(changed.values())


def _merge_into(insight: Memory, others: Sequence[Memory], changed: dict[str, Memory], now: datetime,
                report: ConsolidationReport) -> None:
    """Expire the active insights `others` (their latest version in `changed`) as merged into `insight`."""
    for other in others:
        other = changed.get(other.id, other)
        if other.id != insight.id and other.status is MemoryStatus.ACTIVE:
            other.status = MemoryStatus.EXPIRED
            other.superseded_by = insight.id
            other.updated_at = now
            other.metadata = {**other.metadata, "merged_into": insight.id}
            changed[other.id] = other
            report.expired.append(other.content)
            report.expired_ids.append(other.id)


def _note_checked_expired(changed: dict[str, Memory], observations: Sequence[Memory], insights: Sequence[Memory],
                          state: ReflectionState) -> None:
    """Record in each active insight changed or stale the expired sources looked at now, in `changed`."""
    expired_now = {m.id for m in observations if m.status is MemoryStatus.EXPIRED}
    for insight in list(changed.values()) + [m for m in insights if m.id in state.stale]:
        # an expired source looked at now never makes the insight stale again
        current = changed.get(insight.id, insight)
        if current.type is not MemoryType.INSIGHT or current.status is not MemoryStatus.ACTIVE:
            continue
        checked = (set(current.metadata.get("checked_expired") or []) | set(state.stale.get(current.id, []))
                   | (expired_now & set(current.source_ids)))
        current.metadata = {**current.metadata, "checked_expired": sorted(checked)}
        changed[current.id] = current


def _labels(values: Any, prefix: str, memories: Sequence[Memory]) -> list[Memory]:
    if not isinstance(values, list):
        values = [values] if values is not None else []
    found: list[Memory] = []
    for value in values:
        index = label_index(value, prefix, len(memories))
        if index is not None and memories[index] not in found:
            found.append(memories[index])
    return found


def _commit_marks(env: StepEnv, observations: Sequence[Memory], changed: Sequence[Memory],
                  state: ReflectionState) -> None:
    """Write the insights and the observations' "reflected" marks in one transaction."""
    marked = []
    changed_ids = {m.id for m in changed}
    for memory in observations:
        if memory.id not in changed_ids:
            memory.metadata = {**memory.metadata, "reflected": True}
            marked.append(memory)
    memories = list(changed) + marked
    if not memories:
        return
    need = env.notes.pop("reflect_vectors", set())
    texts = [embed_text(m, env.backend.embedder) for m in memories if m.id in need]
    fresh = iter(env.backend.embedder.embed(texts)) if texts else iter(())
    vectors = [next(fresh) if m.id in need else None for m in memories]
    created = env.notes.pop("reflect_created", set())
    env.commit(memories[0].user_id, memories, vectors, [], anchors=[m.id for m in memories if m.id not in created])
