"""One learning step: a finished run (its marker, pending under the agent's scope) -> procedures.

1. The outcome is counted on the procedures the run followed (``procedures_used``): uses, successes,
   failures, last use, and the weight retrieval ranks them by (`weight`). No model is needed.
2. The run is read from the user's log (`scope`); a run without a tool call teaches no procedure.
3. **Ask** (one LLM call): the run and the related procedures the agent already has (P1, P2, ...)
   -> ``{"procedures": [...]}``. An answer cut off at the token cap, or without that list, does not
   account for the run: the marker stays pending (its attempt counted) and is asked again.
4. **Check** (`run.refusal`): grounded in the run, no personal data (the run's names, and the people
   and pets its users' ledgers know), no failed call told again; a refused one is reported. Beside
   the model's, each failed tool's lesson the run itself shows (`lessons`: the failed call and the
   call that then worked, told by shapes) is checked alike and stored (``procedures.engine_lessons``).
5. **Repeats and contradictions**: a proposal that says the same as a shown procedure (the model's
   ``same_as``, or the same text) adds a run to it instead of being stored; one that ``replaces`` a
   shown procedure expires it with ``superseded_by`` the new one. A label the prompt did not show,
   or one naming a procedure about none of the same tools, is ignored (never a wrong reference).
6. **Commit**: the new and changed procedures and the marker's "done" in one transaction, under the
   scope's lease. A procedure's id derives from its marker, so a run learnt twice overwrites.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Sequence

from ..consolidation.extract import normalise
from ..consolidation.prompts import load_prompt
from ..consolidation.report import ConsolidationReport
from ..consolidation.steps import MAX_SOURCE_IDS, StepEnv, derived_id, embed_text
from ..models.structured import IncompleteAnswerError
from ..storage.base import StoredMessage
from ..storage.messages import is_forgotten
from ..types import Memory, MemoryStatus, MemoryType, as_aware, utc_now
from .lessons import lessons
from .run import AnswerError, Proposed, Run, parse_answer, private_words, refusal, render_run
from .scope import RunMarker, parse_marker

log = logging.getLogger("memoryscope_plugins.procedures")
TYPES = (MemoryType.PROCEDURE,)
PREVIOUS_MARKERS = 200  # earlier run markers read to find where the run starts


def weight(metadata: dict) -> float:
    """How much a procedure's later outcomes back it: (1 + successes) / (1 + failures), between 0.25
    and 4 (1 with no outcome yet). Retrieval multiplies its score by this."""
    successes = int(metadata.get("successes", 0) or 0)
    failures = int(metadata.get("failures", 0) or 0)
    return max(0.25, min(4.0, (1 + successes) / (1 + failures)))


def content_of(proposed: Proposed, language: str) -> str:
    """The text a procedure is stored, embedded and shown as."""
    if language == "zh":
        why = f"（原因：{proposed.why}）" if proposed.why else ""
        return f"{proposed.when}：{proposed.do}{why}"
    why = f" (why: {proposed.why})" if proposed.why else ""
    return f"When {proposed.when}: {proposed.do}{why}"


def learn_run(env: StepEnv, scope: str, stored: StoredMessage, report: ConsolidationReport) -> None:
    """Learn from one run marker (see the module docstring); raises what `StepEnv` raises, and
    `AnswerError` / `ModelError` when the answer does not account for the run (left pending)."""
    marker = parse_marker(stored.message.content)
    changed: dict[str, Memory] = {}
    if marker is not None:
        _count_outcome(env, scope, marker, stored, changed)
    run = _read_run(env, scope, stored, marker) if marker is not None else None
    if marker is None or run is None or not run.calls:
        env.commit(scope, list(changed.values()), [None] * len(changed), [stored.id])
        report.messages += 1
        return
    language = env.language([m.message.content for m in run.messages if m.message.tool_call is None])
    shown = _related(env, scope, run)
    proposals = _ask(env, scope, marker, run, shown, language, report)
    created = _apply(scope, stored, run, proposals, shown, changed, language, report, env)
    vectors = env.backend.embedder.embed([embed_text(m, env.backend.embedder) for m in created]) if created else None
    rows = ([vectors[i] for i in range(len(created))] if vectors is not None else []) + [None] * len(changed)
    env.commit(scope, created + list(changed.values()), rows, [stored.id])
    report.messages += 1
    report.added.extend(m.content for m in created)
    report.added_ids.extend(m.id for m in created)


def _count_outcome(env: StepEnv, scope: str, marker: RunMarker, stored: StoredMessage,
                   changed: dict[str, Memory]) -> None:
    if not marker.used or marker.outcome == "unknown":
        return
    when = as_aware(stored.message.timestamp or utc_now())
    for memory in env.backend.store.get(scope, marker.used):
        if memory.type is not MemoryType.PROCEDURE:
            continue
        data = dict(memory.metadata)
        data["uses"] = int(data.get("uses", 0) or 0) + 1
        key = "successes" if marker.outcome == "succeeded" else "failures"
        data[key] = int(data.get(key, 0) or 0) + 1
        data["last_used"] = when.isoformat()
        data["weight"] = weight(data)
        memory.metadata = data
        memory.updated_at = utc_now()
        changed[memory.id] = memory


def _read_run(env: StepEnv, scope: str, stored: StoredMessage, marker: RunMarker) -> Run | None:
    """The run's messages: the user's last ones with the agent (of its session, when given) up to
    the marker's position, after the end of the run before it, at most ``run_messages``."""
    limit = env.backend.settings.procedures.run_messages
    store = env.backend.store
    messages = store.recent_messages(marker.user_id, marker.agent_id, marker.last_seq + 1, limit)
    start = -1
    for earlier in reversed(store.recent_messages(scope, marker.agent_id, stored.seq, PREVIOUS_MARKERS)):
        previous = parse_marker(earlier.message.content)
        if previous is not None and previous.user_id == marker.user_id and previous.session_id == marker.session_id:
            start = previous.last_seq
            break
    # a deleted turn's message (forgotten) is no part of the run any more
    messages = [m for m in messages if m.seq > start and not is_forgotten(m.message.content, m.message.metadata)]
    if marker.session_id is not None:
        messages = [m for m in messages if m.session_id == marker.session_id]
    return Run(messages=list(messages), outcome=marker.outcome) if messages else None


def _related(env: StepEnv, scope: str, run: Run) -> list[Memory]:
    count = env.backend.settings.procedures.related
    if count <= 0:
        return []
    text = " ".join(m.message.content for m in run.messages if m.message.role == "user") or render_run(run)
    vector = env.backend.embedder.embed([text], kind="query")[0]
    return [r.memory for r in env.backend.search.related_each(scope, text, vector, types=TYPES, limit=count)]


def _ask(env: StepEnv, scope: str, marker: RunMarker, run: Run, shown: Sequence[Memory], language: str,
         report: ConsolidationReport) -> list[Proposed]:
    cfg = env.backend.settings.procedures
    prompt = load_prompt("procedure", language, env.cfg.prompts_dir)
    existing = "\n".join(f"P{i} {m.content}" for i, m in enumerate(shown, start=1)) or prompt.text("none", "(none)")
    messages = prompt.messages(agent=marker.agent_id, existing=existing, outcome=run.outcome, run=render_run(run),
                               max=str(cfg.max_per_run))
    try:
        value = env.ask_json(scope, "procedure", messages, ["procedures"], report, max_tokens=cfg.max_output_tokens)
    except IncompleteAnswerError:
        report.incomplete = True
        log.warning("the model's procedure answer stopped at the token cap; the run stays queued")
        raise
    return parse_answer(value)


def _apply(scope: str, stored: StoredMessage, run: Run, proposals: Sequence[Proposed], shown: Sequence[Memory],
           changed: dict[str, Memory], language: str, report: ConsolidationReport, env: StepEnv) -> list[Memory]:
    labels = {f"P{i}": m for i, m in enumerate(shown, start=1)}
    by_text = {normalise(m.content): m for m in shown}
    private = private_words(run) + _known_people(env, run)
    created: list[Memory] = []
    seen: set[str] = set()
    now = utc_now()

    def take(proposed: Proposed, by_engine: bool) -> None:
        reason = refusal(proposed, run, private)
        content = content_of(proposed, language)
        if reason is not None:
            report.rejected.append(f"{reason}: {content}")
            return
        key = normalise(content)
        if key in seen:
            return
        seen.add(key)
        sources = _sources(run, proposed)
        tools = set(proposed.tools) | _tools_of(run, proposed)
        same = _referenced(labels, proposed.same_as, tools) or by_text.get(key)
        if same is not None and same.status is MemoryStatus.ACTIVE:
            target = changed.setdefault(same.id, same)
            _add_run(target, sources, stored, now)
            report.merged.append(target.content)
            return
        memory = Memory(
            id=derived_id("procedure", scope, [stored.id], len(created)), user_id=scope, agent_id=stored.agent_id,
            content=content, type=MemoryType.PROCEDURE, created_at=as_aware(stored.message.timestamp or now),
            updated_at=now, source_ids=sources,
            metadata={"when": proposed.when, "do": proposed.do, "why": proposed.why,
                      "tools": sorted(tools), "outcome": run.outcome,
                      "runs": 1, "uses": 0, "successes": 0, "failures": 0, "weight": 1.0, "language": language,
                      "origin": "procedure", "by": "engine" if by_engine else "model"})
        old = _referenced(labels, proposed.replaces, tools)
        if old is not None and old.status is MemoryStatus.ACTIVE and old.id not in {m.id for m in created}:
            old = changed.setdefault(old.id, old)
            old.status, old.superseded_by, old.updated_at = MemoryStatus.EXPIRED, memory.id, now
            old.metadata = {**old.metadata, "expired_at": now.isoformat()}
            memory.metadata["replaces"] = old.id
            report.expired.append(old.content)
            report.expired_ids.append(old.id)
        created.append(memory)

    limit = env.backend.settings.procedures.max_per_run
    for proposed in proposals[:limit]:
        take(proposed, by_engine=False)
    if env.backend.settings.procedures.engine_lessons:
        for lesson in lessons(run, language):
            if len(created) < limit:
                take(lesson, by_engine=True)
    if report.rejected:
        log.info("%d procedure(s) of a run were refused by the checks", len(report.rejected))
    return created


def _known_people(env: StepEnv, run: Run) -> list[str]:
    """The names and aliases of the people and pets the run's users' ledgers know: what shows a name
    the run writes in lower case only ("call mira back") to be one."""
    users = sorted({m.user_id for m in run.messages})
    return [name for user in users for kind in ("person", "pet")
            for entity in env.backend.store.entities(user, kind=kind) for name in entity.names]


def _referenced(labels: dict[str, Memory], label: str | None, tools: set[str]) -> Memory | None:
    """The shown procedure a label names, when it is about one of the same tools (a procedure about
    other tools is no repeat of it and cannot prove it wrong: the reference is ignored)."""
    memory = labels.get((label or "").strip().upper())
    if memory is None or not tools & set(memory.metadata.get("tools") or []):
        return None
    return memory


def _tools_of(run: Run, proposed: Proposed) -> set[str]:
    calls = run.calls
    return {calls[n - 1].message.tool_call.name for n in proposed.calls  # type: ignore[union-attr]
            if 1 <= n <= len(calls)}


def _sources(run: Run, proposed: Proposed) -> list[str]:
    """The run's messages a procedure rests on: the user's words and the calls it cites (or, citing
    none, the calls of its tools)."""
    calls = run.calls
    cited = [calls[n - 1].id for n in proposed.calls if 1 <= n <= len(calls)]
    if not cited:
        cited = [m.id for m in calls if m.message.tool_call is not None and m.message.tool_call.name in proposed.tools]
    said = [m.id for m in run.messages if m.message.role == "user"]
    return list(dict.fromkeys(said + cited))[-MAX_SOURCE_IDS:]


def _add_run(memory: Memory, sources: Sequence[str], stored: StoredMessage, now: datetime) -> None:
    data = dict(memory.metadata)
    data["runs"] = int(data.get("runs", 1) or 1) + 1
    data["last_learned_at"] = as_aware(stored.message.timestamp or now).isoformat()
    memory.metadata = data
    memory.source_ids = list(dict.fromkeys(list(memory.source_ids) + list(sources)))[-MAX_SOURCE_IDS:]
    memory.updated_at = now


__all__ = ["learn_run", "weight", "content_of", "AnswerError"]
