"""One consolidation step: a batch of pending messages -> observations, checked and committed.

1. **Extract** (one LLM call): one verdict per message, with its observations (`extract`). Only
   the messages the answer gives a verdict on can be marked done; the others stay pending, their
   attempt counted, and are asked again in a smaller batch. An answer cut off at the token cap is
   not guessed at: its complete entries are used, the rest is asked again.
2. **Check what the model wrote** (no LLM): observations come only from the user's messages (the
   assistant's suggestions are never the user's facts); hypothetical and fictional content is
   reported, never stored as fact; first-person text is framed as the speaker's words; the
   speaker is the message's author; an event time comes only from time words the source message
   really holds (`wording`, `event_time`); a value the message corrected within itself is
   replaced by the one meant (`cues.corrected`; the model's words kept in ``model_wrote``).
3. **Repeats and contradictions** (`judge`): the engine finds the related existing observations
   and the related earlier observations of the same batch; a same-text or nearly identical pair
   is a repeat without asking, the rest are put to the model as numbered "same / outdated /
   both" questions (a second, small LLM call, only when there are such pairs).
4. **Commit**: a repeat adds a mention to the memory it repeats (once per batch); an outdated
   memory is expired with ``superseded_by`` the new one (nothing is deleted); everything, and the
   "done" mark of the accounted messages, goes into the store in one transaction. Observation
   ids derive from their source message, so a message processed twice overwrites, never
   duplicates.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from .. import metrics
from ..errors import LeaseLostError, MessagesGoneError, ModelError, StaleLedgerError, StoreError
from ..indexing import embedding_text
from ..log_hygiene import user_ref
from ..models.base import ChatMessages, ChatModel, ChatResult, TokenUsage
from ..models.structured import IncompleteAnswerError, UsageMeter, chat_json
from ..person import profile_cues
from ..person.profile import normalise_key
from ..retrieval.noise_floor import calibrated
from ..storage.base import LedgerChanges, StoredMessage
from ..storage.leases import Lease
from ..storage.messages import is_forgotten
from ..storage.text_analysis import analyse
from ..timeparse import detect_language, format_memory_time, is_recurring
from ..types import Memory, MemoryStatus, MemoryType, as_aware, utc_now
from . import extract, judge
from .backend import ConsolidationBackend
from .cues import corrected, corrects_itself, framing, last_said, small_talk
from .event_time import resolve_event_time
from .extract import Extracted, Extraction, speaker_of, user_display_name
from .ledger_step import LedgerPlan, Observed, plan_ledger
from .prompts import load_prompt
from .report import ConsolidationReport
from .time_scope import dates_a_start, time_scope
from .wording import copies_the_reply, grounded, third_person, time_words_in

log = logging.getLogger("memoryscope_plugins.consolidation")

MAX_SOURCE_IDS = 50
MINED_ROLES = ("user",)  # the assistant's words are context: kept as turns, never mined as the user's facts
POLICY_OUTCOMES = {"assistant": "the assistant's words (kept as a turn, not mined for the user's facts)"}
FRAMING_WORDS = "said 说"  # what `wording.third_person` adds
# Extraction compares with observations only: an insight is a summary that reflection rewrites when
# its source observations expire, so a contradiction always expires the observation it contradicts.
RELATED_TYPES = (MemoryType.OBSERVATION,)


class GoneError(RuntimeError):
    """What the step read was deleted while it ran (e.g. `delete_all`); its result is dropped."""


class CountingModel:
    """A `ChatModel` wrapper that counts requests and tokens (one per step, so counts are per step).

    A call that failed after retries counts every request it sent (``ModelError.attempts``).
    """

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self.name = getattr(model, "name", type(model).__name__)
        self.calls = 0
        self.usage = TokenUsage()

    def chat(self, messages: ChatMessages, **options: Any) -> ChatResult:
        try:
            result = self._model.chat(messages, **options)
        except ModelError as exc:
            self.calls += max(1, int(getattr(exc, "attempts", 1) or 1))
            raise
        self.calls += 1
        self.usage += result.usage
        return result

    async def achat(self, messages: ChatMessages, **options: Any) -> ChatResult:
        try:
            result = await self._model.achat(messages, **options)
        except ModelError as exc:
            self.calls += max(1, int(getattr(exc, "attempts", 1) or 1))
            raise
        self.calls += 1
        self.usage += result.usage
        return result


@dataclass(slots=True)
class StepEnv:
    """What a step needs from the service: the backend, the meter, the lease check, and the lease
    owner whose lease every commit is fenced by (None: commits unfenced)."""

    backend: ConsolidationBackend
    meter: UsageMeter
    check_lease: Callable[[], bool] = lambda: True
    lease_owner: str | None = None
    max_repairs: int = 1
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self):
        return self.backend.settings.consolidation

    def language(self, texts: Sequence[str]) -> str:
        """consolidation.language, else the engine's language, else detected from ``texts``."""
        if self.cfg.language != "auto":
            return self.cfg.language
        if self.backend.settings.language != "auto":
            return self.backend.settings.language
        return detect_language("\n".join(texts))

    def ask_json(self, user_id: str, operation: str, messages: list[dict[str, str]], required: Sequence[str],
                 report: ConsolidationReport, *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Any:
        """One structured call (plus at most `max_repairs` re-asks), metered per user and operation,
        counted in ``report`` whether it succeeds or not."""
        llm = self.backend.llm
        if llm is None:
            raise ModelError("consolidation needs an LLM")
        counting = CountingModel(llm)
        try:
            with metrics.purpose(operation):  # "consolidate", "judge", "reflect": the model calls' label
                value, _ = chat_json(counting, messages, required_keys=required, max_repairs=self.max_repairs,
                                     max_tokens=max_tokens, schema=schema)
            if self.backend.settings.log_content:  # the user asked for memory text in debug logs
                log.debug("%s answer for user %s: %s", operation, user_ref(user_id),
                          json.dumps(value, ensure_ascii=False))
        finally:
            report.llm_calls += counting.calls
            report.prompt_tokens += counting.usage.prompt_tokens
            report.completion_tokens += counting.usage.completion_tokens
            self.meter.add(user_id, operation, counting.usage)
        return value

    def commit(self, user_id: str, memories: Sequence[Memory], vectors: Sequence[Any] | None,
               done_ids: Sequence[str], *, anchors: Sequence[str] = (), ledger: LedgerChanges | None = None) -> None:
        """Renew the lease, check that the memories the step rests on still exist (the user may have
        been deleted meanwhile: nothing must come back), then write everything (with the ``ledger``
        changes) in one transaction that also checks the lease is still ours (`LeaseLostError`
        otherwise: a worker paused past its lease never commits over the one that took it over) and
        that the step's messages are still pending (`GoneError` otherwise: one was deleted)."""
        if not self.check_lease():
            raise LeaseLostError("the user's lease was taken over; not committing")
        store = self.backend.store
        if anchors and len(store.get(user_id, list(anchors))) < len(set(anchors)):
            raise GoneError("memories this step rests on were deleted; not committing")
        lease = Lease(user_id, self.lease_owner) if self.lease_owner is not None else None
        try:
            store.commit_consolidation(list(memories), list(vectors) if vectors is not None else None,
                                       list(done_ids), lease=lease, ledger=ledger if ledger else None)
        except MessagesGoneError:  # the store checks in the commit's own transaction
            raise GoneError("the messages of this step are no longer pending (deleted?); not committing") from None


def embed_text(memory: Memory, embedder: object | None = None) -> str:
    """What the embedder sees for a memory: the engine's own rule, so re-embedding agrees."""
    return embedding_text(memory, embedder)


def derived_id(kind: str, user_id: str, keys: Sequence[str], index: int) -> str:
    """A stable id from the inputs of a step (same inputs, same id: reprocessing overwrites)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"memoryscope:{kind}:{user_id}:{'|'.join(keys)}:{index}").hex


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


def output_budget(cfg: Any, messages: int, boost: int = 1) -> int:
    """max_tokens of an extraction call for ``messages`` messages (``boost`` x after a cut-off)."""
    return min(cfg.max_output_tokens * boost, (200 + cfg.output_tokens_per_message * messages) * boost)


@dataclass(slots=True)
class _New:
    """A new observation on its way to the store."""

    item: Extracted
    source: StoredMessage
    memory: Memory
    repeat_of: Memory | None = None  # merged into this memory instead of being stored


def consolidate_batch(env: StepEnv, user_id: str, batch: Sequence[StoredMessage], *,
                      report: ConsolidationReport | None = None, boost: int = 1) -> ConsolidationReport:
    """Consolidate one batch of a user's pending messages (see the module docstring).

    ``report`` is filled in place (calls and tokens are counted even when the step raises).
    Messages the model's answer did not account for are listed in ``report.unaccounted_ids``
    and left pending.

    Raises:
        ModelError: the model failed (after its retries) or gave no usable JSON.
        ExtractionError: the JSON is not in the expected shape.
        LeaseLostError / GoneError: the step must not commit (see their docs).
    """
    backend, cfg = env.backend, env.cfg
    report = report if report is not None else ConsolidationReport()
    # assistant / system / tool, and a deleted turn's message should one be pending: done unread
    def mined(m: StoredMessage) -> bool:
        return m.message.role in MINED_ROLES and not is_forgotten(m.message.content, m.message.metadata)
    policy_done = [m for m in batch if not mined(m)]
    minable = [m for m in batch if mined(m)]
    if not minable:
        env.commit(user_id, [], None, [m.id for m in policy_done])
        report.messages += len(policy_done)
        _outcomes(report, policy_done, [], [], set())
        return report
    agent_id = batch[0].agent_id
    context = backend.store.recent_messages(user_id, agent_id, batch[0].seq, cfg.context_messages) \
        if cfg.context_messages else []
    # the agent's tool calls are no one's words; a deleted turn's message has none left
    context = [m for m in context if m.message.tool_call is None
               and not is_forgotten(m.message.content, m.message.metadata)]
    language = env.language([m.message.content for m in minable])
    user_name = user_display_name(list(context) + list(batch), user_id)
    extraction = _extract(env, user_id, batch, minable, context, language, user_name, report, boost)
    accounted = [minable[i] for i in sorted(extraction.accounted)]
    report.unaccounted_ids.extend(m.id for i, m in enumerate(minable) if i not in extraction.accounted)
    if not extraction.complete:
        report.incomplete = True
    if extraction.repeated_items:
        log.warning("the model repeated %d observation(s) for user %s (a looping answer); kept each once",
                    extraction.repeated_items, user_ref(user_id))
    done = policy_done + accounted
    if not done:
        return report
    new, flagged, refused = _checked_observations(user_id, batch, context, minable, extraction, language, user_name)
    texts = [embed_text(n.memory, backend.embedder) for n in new]
    vectors = backend.embedder.embed(texts) if new else np.zeros((0, 1))
    changes = _resolve(env, user_id, new, language, user_name, report)
    created = [n for n in new if n.repeat_of is None]
    memories = [n.memory for n in created] + list(changes.changed.values())
    memory_vectors = [vectors[i] for i, n in enumerate(new) if n.repeat_of is None] + [None] * len(changes.changed)
    ledger = _commit_with_ledger(env, user_id, memories, memory_vectors, [m.id for m in done], list(changes.changed),
                                 lambda: _ledger(env, user_id, batch, minable, extraction, new, language, user_name))
    report.messages += len(done)
    if ledger is not None:
        report.entities.extend(ledger.new_entities)
        report.profile.extend(ledger.profile)
    for n in created:
        report.added.append(n.memory.content)
        report.added_ids.append(n.memory.id)
    report.flagged.extend(text for _, text in flagged)
    report.rejected.extend(refused)
    if refused:
        log.info("%d observation(s) for user %s were refused: not founded on their own message", len(refused),
                 user_ref(user_id))
    report.merged.extend(changes.merged)
    report.expired.extend(changes.expired)
    report.expired_ids.extend(changes.expired_ids)
    _outcomes(report, policy_done, accounted, new, {source_id for source_id, _ in flagged})
    return report


def _extract(env: StepEnv, user_id: str, batch: Sequence[StoredMessage], minable: Sequence[StoredMessage],
             context: Sequence[StoredMessage], language: str, user_name: str, report: ConsolidationReport,
             boost: int) -> Extraction:
    prompt = load_prompt("consolidate", language, env.cfg.prompts_dir)
    messages = extract.render(prompt, user=user_name, agent=batch[0].agent_id, context=context, batch=batch,
                              numbered=minable)
    try:
        value = env.ask_json(user_id, "consolidate", messages, ["messages"], report,
                             schema=extract.answer_schema(minable, language),
                             max_tokens=output_budget(env.cfg, len(minable), boost))
    except IncompleteAnswerError as exc:
        salvaged = extract.salvage_entries(exc.text)
        result = extract.parse_extraction(salvaged, minable, complete=False, language=language) \
            if salvaged is not None else Extraction(complete=False)
        log.warning("the model's answer for user %s stopped at the token cap; %d of %d message(s) accounted "
                    "for, the rest stay pending", user_ref(user_id), len(result.accounted), len(minable))
        return result
    return extract.parse_extraction(value, minable, language=language)


def _commit_with_ledger(env: StepEnv, user_id: str, memories: Sequence[Memory], vectors: Sequence[Any],
                        done_ids: Sequence[str], anchors: Sequence[str],
                        plan: Callable[[], LedgerPlan | None]) -> LedgerPlan | None:
    """Commit the step with its ledger changes, and return the plan that was written.

    The plan links entities read from the store; a user's edit (delete, merge) in between makes the
    store refuse the whole commit (`StaleLedgerError`, nothing written). The ledger is then planned
    again from the store as it is now, and if that is refused too the step commits without it: the
    memories and the messages' verdicts never wait on the ledger."""
    ledger = plan()
    for again in (True, False):
        try:
            env.commit(user_id, memories, vectors, done_ids, anchors=anchors,
                       ledger=ledger.changes if ledger is not None else None)
            return ledger
        except StaleLedgerError:
            if ledger is None:
                raise
            ledger = plan() if again else None
            log.info("the entity ledger of user %s changed during a consolidation step; %s", user_ref(user_id),
                     "planned again" if again else "committing without ledger changes")
    env.commit(user_id, memories, vectors, done_ids, anchors=anchors, ledger=None)
    return None


def _ledger(env: StepEnv, user_id: str, batch: Sequence[StoredMessage], minable: Sequence[StoredMessage],
            extraction: Extraction, new: Sequence[_New], language: str, user_name: str) -> LedgerPlan | None:
    """The step's entity ledger and profile changes (`ledger_step`). A failure here never costs
    the step its memories: it is logged and the step commits without ledger changes."""
    observed = [Observed(item=n.item, memory=n.repeat_of if n.repeat_of is not None else n.memory,
                         message=n.source.message.content) for n in new]
    try:
        return plan_ledger(env.backend.store, user_id, batch, minable, extraction, observed, language, user_name)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - the memories matter more than the ledger
        log.warning("the entity ledger of user %s was not updated in this step (%s)", user_ref(user_id),
                    type(exc).__name__)
        return None


def _checked_observations(user_id: str, batch: Sequence[StoredMessage],
                          context: Sequence[StoredMessage], minable: Sequence[StoredMessage], extraction: Extraction,
                          language: str, user_name: str
                          ) -> tuple[list[_New], list[tuple[str, str]], list[str]]:
    """The model's items that may become memories, with speaker, wording and event time checked;
    the ``(message id, text)`` of items that are not facts about the user; and the texts refused
    as not founded on their message."""
    now = utc_now()
    out: list[_New] = []
    flagged: list[tuple[str, str]] = []
    refused: list[str] = []
    per_message: dict[int, int] = {}
    names = frozenset(analyse(f"{user_name} {FRAMING_WORDS}"))
    before = _previous_lines(list(context) + list(batch))
    replies = {earlier.id: later.message.content for earlier, later in zip(batch, batch[1:])
               if later.message.role not in MINED_ROLES}
    for item in extraction.items:
        source = minable[item.message]
        said = source.message.content
        if small_talk(item.content, names) or copies_the_reply(item.content, said, replies.get(source.id), names):
            refused.append(item.content)  # "Oskar says the weather is nice."; the assistant's "Great name!"
            continue
        cue = framing(item.content, said, speaker_of(source), names)
        real = item.reality == "real" if cue == "model" else cue == "real"
        if not real:  # a story's plot, a hypothetical, someone else's doing: never the user's fact
            flagged.append((source.id, item.content))
            continue
        if not grounded(item.content, source.message.content, before.get(source.id), names):
            refused.append(item.content)  # the words of another message, or the assistant's opinion
            continue
        position = per_message.get(item.message, 0)
        per_message[item.message] = position + 1
        speaker = speaker_of(source)
        when = as_aware(source.message.timestamp or utc_now())
        content = corrected(item.content, said)  # "每周三，哦不对，是每周四" kept as 每周三: the value meant
        memory = Memory(
            id=derived_id("observation", user_id, [source.id], position), user_id=user_id,
            agent_id=source.agent_id, content=third_person(content, speaker, language),
            type=MemoryType.OBSERVATION, created_at=when, updated_at=now, role=source.message.role,
            session_id=source.session_id, source_ids=[source.id],
            metadata={"kind": item.kind, "about": item.about, "said_by": speaker, "importance": item.importance,
                      "language": language, "mentions": 1, "reflected": False, "origin": "consolidation"})
        if content != item.content:
            memory.metadata["model_wrote"] = item.content
        _set_event_time(memory, item, source.message.content, when, names)
        out.append(_New(item=item, source=source, memory=memory))
    return out, flagged, refused


def _previous_lines(messages: Sequence[StoredMessage]) -> dict[str, str]:
    """For each message, the text of the one before it (what a short reply answers)."""
    return {later.id: earlier.message.content for earlier, later in zip(messages, messages[1:])}


def _set_event_time(memory: Memory, item: Extracted, message: str, when: datetime, names: frozenset[str]) -> None:
    """Event time only from time words the message holds, in the observation's own clause; a habit
    ("every Easter") has none; a state (a job, a home) has none unless the words date its start,
    and then only the start (`time_scope`)."""
    quoted = item.time if time_words_in(item.time, message) else None
    scope = time_scope(item.content, item.kind, message, quoted, names)
    expression = scope.expression
    if expression is None:
        return
    llm_date = item.date if quoted is not None and expression == quoted else None
    if is_recurring(expression) or is_recurring(memory.content):
        return
    start_only = dates_a_start(expression, when)  # "since May": open-ended, whatever the model's date
    if scope.state and not start_only:
        return  # "I work as a nurse" said with "last month" about something else: not an event
    resolved = resolve_event_time(expression, llm_date, when)
    if resolved is None:
        return
    memory.event_start = resolved.start
    memory.event_end = None if start_only else resolved.end
    memory.metadata["event_time_source"] = resolved.source
    memory.metadata["time_expression"] = item.time if llm_date else None
    if start_only:
        memory.metadata["event_time_kind"] = "start"


@dataclass(slots=True)
class _Changes:
    """What resolving did to existing memories (applied to the report after the commit)."""

    changed: dict[str, Memory] = field(default_factory=dict)  # existing memories mentioned or expired
    merged: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    expired_ids: list[str] = field(default_factory=list)


def _resolve(env: StepEnv, user_id: str, new: list[_New], language: str, user_name: str,
             report: ConsolidationReport) -> _Changes:
    """Find repeats and contradictions (see `judge`) and apply them to the new and the existing
    memories."""
    names = frozenset(analyse(f"{user_name} {FRAMING_WORDS}"))  # shared by all: no sign of a common topic
    pairs = _find_pairs(env, user_id, new, names, language)
    to_ask = [p for p in pairs if p.decided is None]
    asked = iter(_ask_judge(env, user_id, new, to_ask, language, user_name, report) if to_ask else [])
    answers = [p.decided if p.decided is not None else next(asked) for p in pairs]
    result = _Changes()
    changed = result.changed
    mentioned: set[str] = set()
    now = utc_now()
    for pair, still_true in zip(pairs, answers):
        entry = new[pair.new]
        if still_true is not False or not judge.same_person(entry.item.about, pair.old.metadata.get("about")):
            continue  # kept: the model did not say it is no longer true, or it is about someone else
        if pair.decided is None and _other_aspect(entry, pair.old, user_name, language):
            report.kept_apart += 1
            continue  # "开始喝红酒" does not end "在深圳工作": a drink is not a job
        old = changed.get(pair.old.id, pair.old)
        replacement = entry.repeat_of.id if entry.repeat_of is not None else entry.memory.id
        if old.status is not MemoryStatus.ACTIVE or replacement == old.id:
            continue
        if pair.old_is_new and any(n.memory is old and n.repeat_of is not None for n in new):
            continue  # that observation is itself a repeat: nothing of it is stored
        old.status = MemoryStatus.EXPIRED
        old.superseded_by = replacement
        old.updated_at = now
        old.metadata = {**old.metadata, "expired_at": now.isoformat()}
        entry.memory.metadata.setdefault("replaces", old.id)
        if not pair.old_is_new:
            changed[old.id] = old
        result.expired.append(old.content)
        result.expired_ids.append(old.id)
    for entry in new:
        if entry.repeat_of is None:
            continue
        target = entry.repeat_of
        if any(target is n.memory for n in new):  # repeats an observation of this same batch
            target.source_ids = list(dict.fromkeys(target.source_ids + [entry.source.id]))
        elif target.id not in mentioned:
            _mention(target, entry, now)
            mentioned.add(target.id)
            changed[target.id] = target
        result.merged.append(target.content)
    return result


def _aspects(observation: str, message: str, proposed: tuple[str, str] | None, user_name: str,
             language: str) -> set[str]:
    """The profile keys an observation states a value of (the model's proposal, and `profile_cues`)."""
    keys = {key for key, _ in profile_cues.stated(observation, message, user_name, language)}
    if proposed is not None:
        try:
            keys.add(normalise_key(proposed[0]))
        except (TypeError, ValueError):
            pass  # a key the profile refuses names no aspect
    return keys


def _other_aspect(entry: _New, old: Memory, user_name: str, language: str) -> bool:
    """Whether the new observation and the old memory each state a profile value, of different
    keys only (a job and a diet): then the model's "no longer true" is a wrong reference, refused,
    and both are kept. Where either states none, the model's answer stands."""
    new_keys = _aspects(entry.memory.content, entry.source.message.content, entry.item.profile, user_name, language)
    old_keys = _aspects(old.content, old.content, None, user_name, language)
    return bool(new_keys) and bool(old_keys) and not new_keys & old_keys


def _find_pairs(env: StepEnv, user_id: str, new: list[_New], names: frozenset[str],
                language: str) -> list[judge.Pair]:
    """The suspected contradictions to ask about (and the repeats, which need no question)."""
    cfg = env.cfg
    if not new or cfg.judge_candidates <= 0:
        return []
    embedder = env.backend.embedder
    floor = judge.noise_floor(embedder, language)
    own = embedder.embed([n.memory.content for n in new], kind="query")
    found: dict[int, list[Memory]] = {}
    for index, entry in enumerate(new):
        related = env.backend.search.related_each(user_id, entry.memory.content, own[index], types=RELATED_TYPES,
                                                  limit=max(cfg.judge_candidates * 3, 10))
        found[index] = [r.memory for r in related]
    existing = list({m.id: m for ms in found.values() for m in ms}.values())
    theirs = dict(zip((m.id for m in existing), embedder.embed([m.content for m in existing], kind="query"))) \
        if existing else {}
    pairs: list[judge.Pair] = []
    for index, entry in enumerate(new):
        said = entry.source.message.content
        for earlier in range(index):  # a correction later in the same conversation
            other = new[earlier]
            if other.repeat_of is not None:
                continue
            similarity = calibrated(float(own[index] @ own[earlier]), floor)
            verdict = judge.compare(entry.memory.content, other.memory.content, similarity, names, cfg, said)
            if verdict == "repeat":
                entry.repeat_of = other.memory
                break
            if verdict == "ask" and (other.source.seq != entry.source.seq or judge.conflicting_values(
                    entry.memory.content, other.memory.content, names)):  # "Wednesday, no, Thursday"
                pairs.append(judge.Pair(new=index, old=other.memory, similarity=similarity, old_is_new=True,
                                        decided=_corrected(entry, other.memory, other.source.id, names)))
        if entry.repeat_of is not None:
            continue
        asked = 0
        for memory in found[index]:
            if memory.id == entry.memory.id:  # this very message was consolidated before
                entry.repeat_of = memory
                break
            similarity = calibrated(float(own[index] @ theirs[memory.id]), floor)
            verdict = judge.compare(entry.memory.content, memory.content, similarity, names, cfg, said)
            if verdict == "repeat":
                entry.repeat_of = memory
                break
            if verdict == "ask" and asked < cfg.judge_candidates:
                same_session = memory.session_id is not None and memory.session_id == entry.memory.session_id
                decided = _corrected(entry, memory, (memory.source_ids or [""])[0], names) if same_session else None
                pairs.append(judge.Pair(new=index, old=memory, similarity=similarity, decided=decided))
                asked += 1
    return [p for p in pairs if new[p.new].repeat_of is None]


def _corrected(entry: _New, old: Memory, old_source_id: str, names: frozenset[str]) -> bool | None:
    """False (the old one is no longer true) when the new observation's message corrects the old
    one's value in the same conversation ("Sorry, Tuesday, not Monday", 哦不对，是周四): the message
    says it corrects, each has a value the other lacks, and the new value is the one said last
    (a later message always is, when it names the old value). None: not sure, ask the model."""
    message = entry.source.message.content
    if not corrects_itself(message):
        return None
    new_values, old_values = judge.distinct_values(entry.memory.content, old.content, names)
    if not new_values or not old_values:
        return None
    if old_source_id != entry.source.id:
        named = any(value in message.casefold() for value in old_values)
        return False if named else None
    return False if last_said(new_values, old_values, message) == "a" else None


def _ask_judge(env: StepEnv, user_id: str, new: list[_New], pairs: list[judge.Pair], language: str,
               user_name: str, report: ConsolidationReport) -> list[bool | None]:
    """The model's answer per question (None: no usable answer, so both memories are kept)."""
    prompt = load_prompt("judge", language, env.cfg.prompts_dir)
    answers: list[bool | None] = []
    for number, pair in enumerate(pairs):
        if number >= judge.MAX_QUESTIONS_PER_STEP:
            answers.append(None)
            report.unjudged += 1
            continue
        entry = new[pair.new]
        messages = judge.render(prompt, user=user_name, pair=pair, new_text=entry.memory.content,
                                new_date=format_memory_time(entry.memory.created_at, language))
        try:
            value = env.ask_json(user_id, "judge", messages, ["still_true"], report, schema=judge.ANSWER_SCHEMA,
                                 max_tokens=24)
        except ModelError as exc:
            log.warning("the model gave no usable answer on a possible contradiction for user %s (%s); both "
                        "memories are kept", user_ref(user_id), type(exc).__name__)
            answers.append(None)
            report.unjudged += 1
            continue
        answer = judge.parse_still_true(value)
        if answer is None:
            report.unjudged += 1
        answers.append(answer)
    return answers


def _mention(memory: Memory, entry: _New, now: datetime) -> None:
    """Record a repetition on the memory it repeats: count, last time, source links."""
    metadata = dict(memory.metadata)
    metadata["mentions"] = int(metadata.get("mentions", 1) or 1) + 1
    metadata["last_mentioned_at"] = entry.memory.created_at.isoformat()
    memory.metadata = metadata
    if entry.source.id not in memory.source_ids:
        memory.source_ids = (list(memory.source_ids) + [entry.source.id])[-MAX_SOURCE_IDS:]
    memory.updated_at = now


def _outcomes(report: ConsolidationReport, policy_done: Sequence[StoredMessage], accounted: Sequence[StoredMessage],
              new: Sequence[_New], flagged: set[str]) -> None:
    """What became of each message marked done (for the report; never logged)."""
    for stored in policy_done:
        report.outcomes[stored.id] = POLICY_OUTCOMES.get(stored.message.role, "not mined (system or tool message)")
    kept: dict[str, str] = {}
    for entry in new:
        kept[entry.source.id] = "kept" if entry.repeat_of is None or kept.get(entry.source.id) == "kept" else "repeat"
    for stored in accounted:
        if stored.id in kept:
            report.outcomes[stored.id] = kept[stored.id]
        elif stored.id in flagged:
            report.outcomes[stored.id] = "not a fact about the user (model verdict)"
        else:
            report.outcomes[stored.id] = "nothing worth keeping (model verdict)"
