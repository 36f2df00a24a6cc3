"""One consolidation step: a batch of pending messages -> observations, resolved and committed.

The step makes ONE LLM call (filter + extract + compare with related memories) and then:

* drops hypothetical / fictional content (reported as "flagged", never stored as a fact);
* merges a repeat into the memory it repeats (no new memory; its mention count, last-mentioned
  time and source links are updated);
* stores a contradiction or update as a new observation and expires the older memory with
  ``superseded_by`` set to the new one (nothing is deleted); an insight it contradicts is left
  for reflection to rewrite;
* computes absolute event times from the time words and the message timestamp.

Everything it writes, and the "done" mark of the batch's messages, goes into the store in one
transaction (`commit_consolidation`), so a crash leaves the batch pending and nothing is
consolidated twice. Observation ids are derived from the batch's message ids, so even a batch
processed twice by mistake overwrites rather than duplicates.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..indexing import embedding_text
from ..models.base import ChatMessages, ChatModel, ChatResult, TokenUsage
from ..models.structured import UsageMeter, chat_json
from ..retrieval.time_parser import detect_language
from ..storage.base import StoredMessage
from ..types import Memory, MemoryStatus, MemoryType, as_aware, utc_now
from .event_time import resolve_event_time
from .extract import Extracted, normalise, parse_extraction, render, speaker_of, user_display_name
from .prompts import load_prompt
from .related import find_related
from .report import ConsolidationReport

if TYPE_CHECKING:
    from ..engine import MemoryScope

MAX_SOURCE_IDS = 50
# Extraction compares with observations only: an insight is a summary that reflection rewrites when
# its source observations expire, so a contradiction always expires the observation it contradicts.
RELATED_TYPES = (MemoryType.OBSERVATION,)


class LeaseLostError(RuntimeError):
    """Another worker took over this user's lease; the step must not commit."""


class GoneError(RuntimeError):
    """What the step read was deleted while it ran (e.g. `delete_all`); its result is dropped."""


class CountingModel:
    """A `ChatModel` wrapper that counts calls and tokens (one per step, so counts are per step)."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self.name = getattr(model, "name", type(model).__name__)
        self.calls = 0
        self.usage = TokenUsage()

    def chat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
             max_tokens: int | None = None) -> ChatResult:
        self.calls += 1
        result = self._model.chat(messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens)
        self.usage += result.usage
        return result

    async def achat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
                    max_tokens: int | None = None) -> ChatResult:
        self.calls += 1
        result = await self._model.achat(messages, json_mode=json_mode, temperature=temperature,
                                         max_tokens=max_tokens)
        self.usage += result.usage
        return result

    def stream(self, messages: ChatMessages, *, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[str]:
        return self._model.stream(messages, temperature=temperature, max_tokens=max_tokens)

    def astream(self, messages: ChatMessages, *, temperature: float | None = None, max_tokens: int | None = None):
        return self._model.astream(messages, temperature=temperature, max_tokens=max_tokens)


@dataclass(slots=True)
class StepEnv:
    """What a step needs from the service: the engine, the meter, and the lease check."""

    engine: "MemoryScope"
    meter: UsageMeter
    check_lease: Callable[[], bool] = lambda: True
    max_repairs: int = 1
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self):
        return self.engine.settings.consolidation

    def language(self, texts: Sequence[str]) -> str:
        """consolidation.language, else the engine's language, else detected from ``texts``."""
        if self.cfg.language != "auto":
            return self.cfg.language
        if self.engine.settings.language != "auto":
            return self.engine.settings.language
        return detect_language("\n".join(texts))

    def ask_json(self, user_id: str, operation: str, messages: list[dict[str, str]], required: Sequence[str],
                 report: ConsolidationReport) -> Any:
        """One structured call (plus at most `max_repairs` re-asks), metered per user and operation."""
        llm = self.engine.llm
        assert llm is not None, "consolidation needs an LLM"
        counting = CountingModel(llm)
        try:
            value, _ = chat_json(counting, messages, required_keys=required, max_repairs=self.max_repairs)
        finally:
            report.llm_calls += counting.calls
            report.prompt_tokens += counting.usage.prompt_tokens
            report.completion_tokens += counting.usage.completion_tokens
            self.meter.add(user_id, operation, counting.usage)
        return value

    def commit(self, user_id: str, memories: Sequence[Memory], vectors: Sequence[Any] | None,
               done_ids: Sequence[str], *, anchors: Sequence[str] = ()) -> None:
        """Renew the lease, check that what the step read still exists (the user may have been
        deleted meanwhile: nothing must come back), then write everything in one transaction."""
        if not self.check_lease():
            raise LeaseLostError("the user's lease was taken over; not committing")
        store = self.engine.store
        if done_ids:
            pending = {m.id for m in store.pending_messages(user_id, limit=max(200, 2 * len(done_ids)))}
            if not set(done_ids) <= pending:
                raise GoneError("the messages of this step are no longer pending (deleted?); not committing")
        if anchors and len(store.get(user_id, list(anchors))) < len(set(anchors)):
            raise GoneError("memories this step rests on were deleted; not committing")
        store.commit_consolidation(list(memories), list(vectors) if vectors is not None else None, list(done_ids))


def embed_text(memory: Memory, embedder: object | None = None) -> str:
    """What the embedder sees for a memory: the engine's own rule, so re-embedding agrees."""
    return embedding_text(memory, embedder)


def derived_id(kind: str, user_id: str, keys: Sequence[str], index: int) -> str:
    """A stable id from the inputs of a step (same inputs, same id: reprocessing overwrites)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"memoryscope:{kind}:{user_id}:{'|'.join(keys)}:{index}").hex


def _message_time(batch: Sequence[StoredMessage], item: Extracted) -> datetime:
    """The time of the latest message the observation comes from (or of the batch)."""
    chosen = [batch[i] for i in item.messages] or list(batch)
    return max(as_aware(m.message.timestamp or utc_now()) for m in chosen)


def _time_reference(batch: Sequence[StoredMessage], item: Extracted) -> datetime:
    """The timestamp of the message that holds the time words (relative times are relative to it)."""
    chosen = [batch[i] for i in item.messages] or list(batch)
    if item.time:
        needle = item.time.casefold()
        for stored in chosen:
            if needle in stored.message.content.casefold():
                return as_aware(stored.message.timestamp or utc_now())
    return _message_time(batch, item)


def select_batch(pending: Sequence[StoredMessage], max_messages: int, max_chars: int) -> list[StoredMessage]:
    """The next batch: messages of the first one's agent, in order, within the size budget
    (a single long message still forms a batch of its own: nothing is cut)."""
    if not pending:
        return []
    agent = pending[0].agent_id
    batch: list[StoredMessage] = []
    chars = 0
    for stored in pending:
        if stored.agent_id != agent:
            continue
        size = len(stored.message.content)
        if batch and (len(batch) >= max_messages or chars + size > max_chars):
            break
        batch.append(stored)
        chars += size
    return batch


def consolidate_batch(env: StepEnv, user_id: str, batch: Sequence[StoredMessage]) -> ConsolidationReport:
    """Consolidate one batch of a user's pending messages (see the module docstring).

    Raises:
        ModelError: the model failed (after its retries) or gave no usable JSON.
        ExtractionError: the JSON is not in the expected shape.
        LeaseLostError: another worker took the user over before the commit.
    """
    engine, cfg = env.engine, env.cfg
    report = ConsolidationReport(messages=len(batch))
    agent_id = batch[0].agent_id
    context = engine.store.recent_messages(user_id, agent_id, batch[0].seq, cfg.context_messages) \
        if cfg.context_messages else []
    texts = [m.message.content for m in batch]
    language = env.language(texts)
    minable = [m for m in batch if m.message.role in ("user", "assistant")]
    if not minable:  # system / tool messages only: nothing to extract
        env.commit(user_id, [], None, [m.id for m in batch])
        return report
    query_texts = [m.message.content for m in minable]
    related = find_related(engine, user_id, query_texts, types=RELATED_TYPES, limit=cfg.related_memories)
    prompt = load_prompt("consolidate", language, cfg.prompts_dir)
    everyone = list(context) + list(batch)
    messages = render(prompt, user=user_display_name(everyone, user_id), agent=agent_id, context=context,
                      batch=batch, related=related)
    value = env.ask_json(user_id, "consolidate", messages, ["observations"], report)
    items = parse_extraction(value, len(batch), len(related))
    memories, vectors_for = _apply(env, user_id, batch, items, related, language, report)
    new_texts = [embed_text(m, engine.embedder) for m in memories if vectors_for.get(m.id)]
    new_vectors = iter(engine.embedder.embed(new_texts)) if new_texts else iter(())
    vectors = [next(new_vectors) if vectors_for.get(m.id) else None for m in memories]
    env.commit(user_id, memories, vectors, [m.id for m in batch],
               anchors=[m.id for m in memories if m.id not in vectors_for])
    return report


def _apply(env: StepEnv, user_id: str, batch: Sequence[StoredMessage], items: Sequence[Extracted],
           related: Sequence[Memory], language: str, report: ConsolidationReport
           ) -> tuple[list[Memory], dict[str, bool]]:
    """Turn the model's items into new and changed memories. Returns them and which need a vector."""
    now = utc_now()
    keys = [m.id for m in batch]
    by_norm = {normalise(m.content): m for m in related}
    changed: dict[str, Memory] = {}  # existing memories touched (merged into or expired)
    created: list[Memory] = []
    seen: dict[str, Memory] = {}
    stale_insights: list[str] = []
    for index, item in enumerate(items):
        if item.reality != "real":
            report.flagged.append(item.content)
            continue
        key = normalise(item.content)
        if key in seen:  # the same observation twice in one answer
            _mention(seen[key], batch, item, now)
            continue
        target = related[int(item.memory[1:]) - 1] if item.memory else None
        if target is None and key in by_norm:  # an exact repeat the model called new
            target, item.relation = by_norm[key], "same"
        if item.relation == "same" and target is not None:
            existing = changed.get(target.id, target)
            if existing.type is MemoryType.INSIGHT:  # already summed up: no new memory
                report.merged.append(existing.content)
                continue
            if existing.status is MemoryStatus.ACTIVE:
                _mention(existing, batch, item, now)
                changed[existing.id] = existing
                report.merged.append(existing.content)
                continue
        sources = [batch[i] for i in item.messages] or list(batch)
        memory = Memory(
            id=derived_id("observation", user_id, keys, index), user_id=user_id, agent_id=batch[0].agent_id,
            content=item.content, type=MemoryType.OBSERVATION, created_at=_message_time(batch, item),
            updated_at=now, role=sources[0].message.role, session_id=sources[0].session_id,
            source_ids=[m.id for m in sources],
            metadata={"kind": item.kind, "about": item.about, "said_by": speaker_of(sources[0]),
                      "importance": item.importance, "language": language, "mentions": 1, "reflected": False,
                      "origin": "consolidation"})
        when = resolve_event_time(item.time, item.date, _time_reference(batch, item))
        if when is not None:
            memory.event_start, memory.event_end = when.start, when.end
            memory.metadata["event_time_source"] = when.source
            memory.metadata["time_expression"] = item.time
        if item.relation == "replaces" and target is not None:
            existing = changed.get(target.id, target)
            if existing.type is MemoryType.INSIGHT:
                stale_insights.append(existing.id)  # reflection rewrites it
                memory.metadata["contradicts"] = existing.id
            elif existing.status is MemoryStatus.ACTIVE:
                existing.status = MemoryStatus.EXPIRED
                existing.superseded_by = memory.id
                existing.updated_at = now
                existing.metadata = {**existing.metadata, "expired_at": now.isoformat()}
                changed[existing.id] = existing
                memory.metadata["replaces"] = existing.id
                report.expired.append(existing.content)
                report.expired_ids.append(existing.id)
        created.append(memory)
        seen[key] = memory
        report.added.append(memory.content)
        report.added_ids.append(memory.id)
    if stale_insights:
        env.notes.setdefault("stale_insights", []).extend(stale_insights)
    memories = created + list(changed.values())
    return memories, {m.id: True for m in created}


def _mention(memory: Memory, batch: Sequence[StoredMessage], item: Extracted, now: datetime) -> None:
    """Record a repetition on the memory it repeats: count, last time, source links."""
    metadata = dict(memory.metadata)
    metadata["mentions"] = int(metadata.get("mentions", 1) or 1) + 1
    metadata["last_mentioned_at"] = _message_time(batch, item).isoformat()
    memory.metadata = metadata
    sources = [batch[i].id for i in item.messages] or [m.id for m in batch]
    memory.source_ids = (list(memory.source_ids) + [s for s in sources if s not in memory.source_ids])[-MAX_SOURCE_IDS:]
    memory.updated_at = now
