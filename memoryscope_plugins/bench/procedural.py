"""The procedural benchmark (issue 43): does an agent's task memory bring back what worked before?

A scenario file is a JSON list of::

    {"name": str, "language": "en"|"zh", "user_id": str, "user_name": str, "agent_id": str,
     "runs": [{"time": ISO-8601 with offset, "outcome": "succeeded"|"failed"|"unknown",
               "messages": [{"role": "user"|"assistant", "content": str} | {"role": "tool", "tool_call": {...}}]}],
     "reference": {"when", "do", "why", "tools"},          # the procedure the runs teach, written by hand
     "distractors": [{"when", "do", "why", "tools"}],      # optional: other procedures of the agent
     "new_task": {"query": str, "tools": [str]},           # a later task, worded differently
     "checks": [{"type": "procedure"|"not_procedure"|"retrieved", "any"|"all"|"none": [str], "what": str}],
     "agent": {"tools": {name: signature}, "context": str, "expect": {"tool": str | [str],
               "arguments": {name: regex}}, "avoid": str}}

Three parts, each scored apart:

(a) **Retrieval, no model.** Every scenario's reference procedure and its distractors are stored
    in one agent's scope (all the file's procedures compete), as the learning step stores a
    procedure; each new task is then retrieved (`retrieve(..., agent_id=..., tools=...)`) and the
    rank of its scenario's reference among ``result.procedures`` is taken: top-1 and top-3.
(b) **Learning, with the configured LLM.** Each scenario on a fresh store: its runs are recorded
    with ``run_outcome``, and the learning step runs on the agent's scope only (the user's own
    messages are not consolidated: this measures procedures). The checks are scored on the stored
    procedures (``procedure``: some active one matches; ``not_procedure``: none does;
    ``retrieved``: one of the procedures `retrieve` returns for the new task matches). Refusals by
    the engine's checks are counted, and every stored procedure is checked again here: it is
    *ungrounded* when it names a tool the runs never called or rests on no recorded tool call.
(c) **The model as the agent** (``agent=True``, after (b)): the model is asked for its first tool
    call on the new task, once with the "What worked before" part of `retrieve`'s context and once
    without it. A call *avoids the recorded error* when its tool is one of ``expect.tool`` and each
    argument named in ``expect.arguments`` that the call gives matches its regular expression
    (searched in the value's JSON text). See `procedural_agent`.

Word lists match as in `bench consolidation`: case-insensitive substrings (``any``: one of,
``all``: every, ``none``: none of).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import ConfigError, ValidationError
from ..procedures.run import Proposed
from ..procedures.scope import procedure_scope
from ..procedures.step import content_of
from ..settings import Settings
from ..types import Memory, MemoryStatus, MemoryType, utc_now
from .consolidation import matches_text, read_scenario_list

CHECK_TYPES = ("procedure", "not_procedure", "retrieved")
MESSAGE_GAP = timedelta(seconds=30)
PROCEDURE_FIELDS = ("when", "do", "tools")


def load_scenarios(path: str | Path) -> list[dict[str, Any]]:
    """Read and check a procedural scenario file (see the module docstring).

    Raises:
        ValidationError: the file is missing, not JSON, or not in the scenario format.
    """
    data = read_scenario_list(path)
    names = set()
    for number, scenario in enumerate(data, start=1):
        _check_scenario(scenario, number)
        if scenario["name"] in names:
            raise ValidationError(f"scenario {number}: the name {scenario['name']!r} is used twice")
        names.add(scenario["name"])
    return data


def _check_procedure(value: Any, where: str) -> None:
    if not isinstance(value, dict) or any(not value.get(key) for key in PROCEDURE_FIELDS):
        raise ValidationError(f"{where}: a procedure needs 'when', 'do' and 'tools'")
    if not isinstance(value["tools"], list) or not all(isinstance(t, str) for t in value["tools"]):
        raise ValidationError(f"{where}: a procedure's tools are a list of names")


def _check_scenario(scenario: Any, number: int) -> None:
    where = f"scenario {number}"
    if not isinstance(scenario, dict):
        raise ValidationError(f"{where} is not an object")
    for key in ("name", "user_id", "agent_id", "runs", "reference", "new_task", "checks"):
        if key not in scenario:
            raise ValidationError(f"{where} lacks {key!r}")
    if scenario.get("language", "en") not in ("en", "zh"):
        raise ValidationError(f"{where}: language must be 'en' or 'zh'")
    if not isinstance(scenario["runs"], list) or not scenario["runs"]:
        raise ValidationError(f"{where}: runs must be a non-empty list")
    for run in scenario["runs"]:
        if not isinstance(run, dict) or not isinstance(run.get("messages"), list) or not run["messages"]:
            raise ValidationError(f"{where}: each run needs a non-empty 'messages' list")
        if run.get("outcome", "unknown") not in ("succeeded", "failed", "unknown"):
            raise ValidationError(f"{where}: a run's outcome is succeeded, failed or unknown")
        try:
            moment = datetime.fromisoformat(str(run.get("time")))
        except ValueError:
            raise ValidationError(f"{where}: run time {run.get('time')!r} is not ISO 8601") from None
        if moment.tzinfo is None:
            raise ValidationError(f"{where}: run time needs an offset")
    _check_procedure(scenario["reference"], where)
    for distractor in scenario.get("distractors") or []:
        _check_procedure(distractor, where)
    task = scenario["new_task"]
    if not isinstance(task, dict) or not str(task.get("query") or "").strip() or \
            not isinstance(task.get("tools", []), list):
        raise ValidationError(f"{where}: new_task needs a 'query' and a list of 'tools'")
    if not isinstance(scenario["checks"], list):
        raise ValidationError(f"{where}: checks must be a list")
    for check in scenario["checks"]:
        if not isinstance(check, dict) or check.get("type") not in CHECK_TYPES:
            raise ValidationError(f"{where}: unknown check {check!r}; types are {', '.join(CHECK_TYPES)}")


# -------------------------------------------------------------------------------------------------
# (a) retrieval of hand-written procedures, no model


def reference_memory(scope: str, agent_id: str, procedure: dict[str, Any], language: str, key: str) -> Memory:
    """A hand-written procedure as the learning step stores one (content, metadata, type)."""
    proposed = Proposed(when=procedure["when"], do=procedure["do"], why=procedure.get("why") or "",
                        tools=list(procedure["tools"]))
    now = utc_now()
    return Memory(id=uuid.uuid5(uuid.NAMESPACE_URL, f"bench-procedural:{key}").hex, user_id=scope, agent_id=agent_id,
                  content=content_of(proposed, language), type=MemoryType.PROCEDURE, created_at=now, updated_at=now,
                  metadata={"when": proposed.when, "do": proposed.do, "why": proposed.why,
                            "tools": sorted(proposed.tools), "outcome": "succeeded", "runs": 1, "uses": 0,
                            "successes": 0, "failures": 0, "weight": 1.0, "language": language,
                            "origin": "procedure"})


def _settings_for(settings: Settings, workdir: Path, *, llm: bool) -> Settings:
    store = settings.store.model_copy(update={"backend": "sqlite", "path": workdir / "memory.db"})
    consolidation = settings.consolidation.model_copy(update={"worker": "none", "flush_on_close": False})
    procedures = settings.procedures.model_copy(update={"enabled": True, "top_k": 3, "context_tokens": 20_000})
    update: dict[str, Any] = {"store": store, "consolidation": consolidation, "procedures": procedures}
    if not llm:
        update["llm"] = settings.llm.model_copy(update={"provider": "none"})
    return settings.model_copy(update=update)


BENCH_USER = "bench-user"
BENCH_AGENT = "bench-agent"  # part (a): one agent holds every procedure of the file
RETRIEVAL_MODES = ("query", "tools", "all_tools")


def run_retrieval(scenarios: Sequence[dict[str, Any]], settings: Settings, workdir: Path) -> dict[str, Any]:
    """Part (a): each new task's scenario reference among the procedures `retrieve` returns."""
    from ..engine import MemoryScope
    from ..vectors import document_vectors

    rows = []
    with MemoryScope(_settings_for(settings, workdir, llm=False), start_worker=False) as engine:
        references: dict[str, str] = {}
        agent = BENCH_AGENT
        for scenario in scenarios:
            scope, language = procedure_scope(BENCH_USER, agent), scenario.get("language", "en")
            stored = [reference_memory(scope, agent, scenario["reference"], language, scenario["name"])]
            stored += [reference_memory(scope, agent, d, language, f"{scenario['name']}:d{i}")
                       for i, d in enumerate(scenario.get("distractors") or [])]
            engine.store.put(stored, document_vectors(engine.embedder, stored))
            references[scenario["name"]] = stored[0].id
        every = sorted({tool for s in scenarios for tool in s["new_task"].get("tools") or []})
        for scenario in scenarios:
            row: dict[str, Any] = {"name": scenario["name"], "language": scenario.get("language", "en")}
            own: list[str] = list(scenario["new_task"].get("tools") or [])
            modes: tuple[tuple[str, list[str]], ...] = (("query", []), ("tools", own), ("all_tools", every))
            for mode, tools in modes:
                result = engine.retrieve(BENCH_USER, scenario["new_task"]["query"], agent_id=agent, tools=tools)
                ids = [scored.memory.id for scored in result.procedures]
                wanted = references[scenario["name"]]
                row[mode] = {"rank": ids.index(wanted) + 1 if wanted in ids else None,
                             "returned": [scored.memory.content for scored in result.procedures]}
            rows.append(row)
    out: dict[str, Any] = {"scenarios": rows, "total": len(rows),
                           "procedures": sum(1 + len(s.get("distractors") or []) for s in scenarios)}
    for mode in RETRIEVAL_MODES:
        ranks = [row[mode]["rank"] for row in rows]
        out[mode] = {"top1": sum(r == 1 for r in ranks), "top3": sum(r is not None and r <= 3 for r in ranks)}
    return out


# -------------------------------------------------------------------------------------------------
# (b) learning with the configured LLM


def _record_runs(engine: Any, scenario: dict[str, Any]) -> tuple[list[str], set[str], set[str]]:
    """Record the scenario's runs, each ended with its outcome; returns (message ids, the ids of the
    tool calls, the tools called)."""
    user, agent = str(scenario["user_id"]), str(scenario["agent_id"])
    ids: list[str] = []
    call_ids: set[str] = set()
    called: set[str] = set()
    for number, run in enumerate(scenario["runs"], start=1):
        moment = datetime.fromisoformat(run["time"])
        payload = []
        for index, message in enumerate(run["messages"]):
            item = {**message, "timestamp": moment + index * MESSAGE_GAP}
            if message.get("role") == "user" and scenario.get("user_name"):
                item["name"] = scenario["user_name"]
            payload.append(item)
        got = engine.record(user, payload, agent_id=agent, session_id=f"{scenario['name']}:{number}",
                            run_outcome=run.get("outcome", "unknown"))
        ids.extend(got)
        for message_id, message in zip(got, run["messages"]):
            if message.get("tool_call"):
                call_ids.add(message_id)
                called.add(str(message["tool_call"]["name"]))
    return ids, call_ids, called


def _learn(engine: Any, scope: str, attempts: int) -> dict[str, Any]:
    """Run the learning step on the agent's scope until nothing is pending (at most ``attempts``
    rounds: an answer that does not account for a run leaves it pending)."""
    counts: dict[str, Any] = {"calls": 0, "tokens": 0, "rejected": [], "errors": 0}
    for _ in range(max(1, attempts)):
        report = engine._consolidation.consolidate(scope)
        counts["calls"] += report.llm_calls
        counts["tokens"] += report.prompt_tokens + report.completion_tokens
        counts["rejected"].extend(report.rejected)
        counts["errors"] += len(report.errors)
        if not engine.store.pending_messages(scope, limit=1):
            break
    states = [m.state for m in engine.store.recent_messages(scope, None, None, 1000)]
    counts["runs"] = {state: states.count(state) for state in sorted(set(states))}
    return counts


def ungrounded(memory: Memory, call_ids: set[str], called: set[str]) -> bool:
    """Whether a stored procedure names a tool the runs never called or rests on no recorded call."""
    tools = set(memory.metadata.get("tools") or [])
    return not tools <= called or not set(memory.source_ids) & call_ids


def evaluate(check: dict[str, Any], procedures: Sequence[Memory], retrieved: Sequence[str]) -> bool:
    """Whether one check passes on a scenario's stored procedures and those retrieved for its new task."""
    active = [m.content for m in procedures if m.status is MemoryStatus.ACTIVE]
    if check["type"] == "procedure":
        return any(matches_text(text, check) for text in active)
    if check["type"] == "not_procedure":
        return not any(matches_text(text, check) for text in active)
    if check["type"] == "retrieved":
        return any(matches_text(text, check) for text in retrieved)
    raise ValidationError(f"unknown check type {check['type']!r}")


def run_learning(scenario: dict[str, Any], settings: Settings, workdir: Path, *, agent: bool = False,
                 model: Any = None) -> dict[str, Any]:
    """Part (b) (and (c) with ``agent``) of one scenario on a fresh store under ``workdir``."""
    from ..engine import MemoryScope
    from ..storage.base import MemoryFilter
    from .procedural_agent import run_agent

    started = time.perf_counter()
    with MemoryScope(_settings_for(settings, workdir, llm=True), start_worker=False) as engine:
        if engine._consolidation is None:
            raise ConfigError("bench procedural's learning part needs an LLM: set llm.provider and llm.model")
        _, call_ids, called = _record_runs(engine, scenario)
        scope = procedure_scope(str(scenario["user_id"]), str(scenario["agent_id"]))
        counts = _learn(engine, scope, settings.consolidation.max_attempts)
        procedures = engine.store.list(scope, MemoryFilter(types=(MemoryType.PROCEDURE,), statuses=None), limit=100)
        task = scenario["new_task"]
        result = engine.retrieve(str(scenario["user_id"]), task["query"], agent_id=str(scenario["agent_id"]),
                                 tools=list(task.get("tools") or []))
        retrieved = [scored.memory.content for scored in result.procedures]
        results = [(check, evaluate(check, procedures, retrieved)) for check in scenario["checks"]]
        # the same checks on the model's procedures alone (the run's own lessons left out: `procedures.lessons`)
        by_model = [m for m in procedures if m.metadata.get("by") != "engine"]
        model_texts = {m.content for m in by_model}
        model_only = [evaluate(check, by_model, [t for t in retrieved if t in model_texts])
                      for check in scenario["checks"]]
        part: dict[str, Any] = {
            "name": scenario["name"], "language": scenario.get("language", "en"),
            "checks": {"passed": sum(ok for _, ok in results), "total": len(results)},
            "checks_model_only": {"passed": sum(model_only), "total": len(model_only)},
            "stored_by_engine": sum(m.metadata.get("by") == "engine" for m in procedures),
            "failed": [{"type": c["type"], "what": c.get("what", "")} for c, ok in results if not ok],
            "stored": [m.content for m in procedures], "retrieved": retrieved,
            "ungrounded": [m.content for m in procedures if ungrounded(m, call_ids, called)],
            "refused": counts["rejected"], "runs": counts["runs"], "step_errors": counts["errors"],
            "llm": {"calls": counts["calls"], "tokens": counts["tokens"]}}
        if agent and "agent" in scenario:
            part["agent"] = run_agent(scenario, result.context, model, language=scenario.get("language", "en"))
    part["seconds"] = round(time.perf_counter() - started, 1)
    return part


# -------------------------------------------------------------------------------------------------
# The whole benchmark


def run_procedural_bench(path: str | Path, settings: Settings, *, learning: bool | None = None, agent: bool = False,
                         limit: int | None = None,
                         on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run part (a) on every scenario of ``path`` and, with an LLM configured (``learning`` not
    False), parts (b) and, with ``agent``, (c) on the first ``limit`` scenarios."""
    scenarios = load_scenarios(path)
    has_llm = settings.llm.provider != "none" and bool(settings.llm.model)
    if learning is None:
        learning = has_llm
    if (learning or agent) and not has_llm:
        raise ConfigError("bench procedural's learning and agent parts need an LLM: set llm.provider and llm.model")
    if limit is not None and limit < 1:
        raise ValidationError("limit must be at least 1")
    started = time.perf_counter()
    report: dict[str, Any] = {"file": str(path), "scenarios": len(scenarios), "model": None}
    with tempfile.TemporaryDirectory(prefix="memoryscope-bench-proc-") as tmp:
        retrieval_dir = Path(tmp) / "retrieval"
        retrieval_dir.mkdir()
        report["retrieval"] = run_retrieval(scenarios, settings, retrieval_dir)
        if on_progress:
            r = report["retrieval"]
            on_progress(f"retrieval: top-3 {r['query']['top3']}/{r['total']} by the query, "
                        f"{r['tools']['top3']}/{r['total']} with the task's tools")
        if learning:
            report["model"] = settings.llm.model
            report["learning"] = _run_parts(scenarios[:limit], settings, Path(tmp), agent, on_progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _run_parts(scenarios: Sequence[dict[str, Any]], settings: Settings, tmp: Path, agent: bool,
               on_progress: Callable[[str], None] | None) -> dict[str, Any]:
    from ..models.factory import build_llm

    model = build_llm(settings.llm) if agent else None
    parts = []
    for number, scenario in enumerate(scenarios, start=1):
        workdir = tmp / f"s{number}"
        workdir.mkdir()
        part = run_learning(scenario, settings, workdir, agent=agent, model=model)
        parts.append(part)
        if on_progress:
            on_progress(f"[{number}/{len(scenarios)}] {part['name']}: {part['checks']['passed']}/"
                        f"{part['checks']['total']} checks, {len(part['stored'])} stored, {len(part['refused'])} "
                        f"refused, {part['llm']['calls']} LLM calls, {part['seconds']:.0f} s")
    return summarise_learning(parts)


def summarise_learning(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Parts (b) and (c) over the scenarios."""
    agents = [p["agent"] for p in parts if "agent" in p]
    out: dict[str, Any] = {
        "scenarios": list(parts),
        "checks": {"passed": sum(p["checks"]["passed"] for p in parts),
                   "total": sum(p["checks"]["total"] for p in parts)},
        "checks_model_only": {"passed": sum(p["checks_model_only"]["passed"] for p in parts),
                              "total": sum(p["checks_model_only"]["total"] for p in parts)},
        "stored": sum(len(p["stored"]) for p in parts), "ungrounded": sum(len(p["ungrounded"]) for p in parts),
        "stored_by_engine": sum(p["stored_by_engine"] for p in parts),
        "refused": sum(len(p["refused"]) for p in parts),
        "llm": {"calls": sum(p["llm"]["calls"] for p in parts), "tokens": sum(p["llm"]["tokens"] for p in parts)},
        "seconds": round(sum(p["seconds"] for p in parts), 1)}
    if agents:
        out["agent"] = {"scenarios": len(agents),
                        "avoided_with_memory": sum(a["with_memory"]["avoided"] for a in agents),
                        "avoided_without_memory": sum(a["without_memory"]["avoided"] for a in agents),
                        "calls": sum(a["calls"] for a in agents)}
    return out


def format_table(report: dict[str, Any]) -> str:
    """The report as Markdown (retrieval, then learning and the agent when they ran)."""
    r = report["retrieval"]
    lines = [f"Procedural benchmark ({report['file']}): {r['total']} new tasks, {r['procedures']} procedures "
             "of one agent", "",
             "| part (a), no model: the reference procedure | top-1 | top-3 | not in the top 3 |", "|---|---|---|---|"]
    for mode, label in zip(RETRIEVAL_MODES, ("retrieve(query)", "retrieve(query, tools=the task's tools)",
                                              "retrieve(query, tools=every tool of the file)")):
        missed = [row["name"] for row in r["scenarios"] if row[mode]["rank"] is None]
        lines.append(f"| {label} | {_share(r[mode]['top1'], r['total'])} | {_share(r[mode]['top3'], r['total'])} | "
                     f"{', '.join(missed) or '-'} |")
    learning = report.get("learning")
    if learning:
        c = learning["checks"]
        lines += ["", f"part (b), model {report['model']}: {c['passed']}/{c['total']} checks "
                      f"({c['passed'] / max(1, c['total']):.0%}; the model's procedures alone "
                      f"{learning['checks_model_only']['passed']}/{learning['checks_model_only']['total']}), "
                      f"{learning['stored']} procedures stored ({learning['stored_by_engine']} the runs' own lessons), "
                      f"{learning['ungrounded']} ungrounded, {learning['refused']} refused by the engine; "
                      f"{learning['llm']['calls']} LLM calls, {learning['seconds']} s", "",
                  "| scenario | checks | stored | refused | failed checks |", "|---|---|---|---|---|"]
        for part in learning["scenarios"]:
            failed = "; ".join(f"{f['type']}: {f['what']}" for f in part["failed"]) or "-"
            lines.append(f"| {part['name']} | {part['checks']['passed']}/{part['checks']['total']} | "
                         f"{len(part['stored'])} | {len(part['refused'])} | {failed} |")
        agent = learning.get("agent")
        if agent:
            lines += ["", f"part (c), the model as the agent: the first call avoids the recorded error in "
                          f"{agent['avoided_with_memory']}/{agent['scenarios']} scenarios with the procedures' block, "
                          f"{agent['avoided_without_memory']}/{agent['scenarios']} without it ({agent['calls']} calls)"]
    return "\n".join(lines)


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({count / max(1, total):.0%})"
