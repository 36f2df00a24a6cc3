"""The consolidation benchmark: scenarios through the public API, with whatever LLM the settings name.

A scenario file is a JSON list of::

    {"name": str, "language": "en"|"zh", "user_id": str, "user_name": str,
     "sessions": [{"time": ISO-8601 with offset, "messages": [{"role": "user"|"assistant", "content": str}]}],
     "consolidate": "per_session"|"at_end", "reflect": bool, "checks": [...]}

Each scenario gets a fresh store. Its messages are recorded one by one (a message every 30 s from
the session's time) while the background worker runs, as in an application; consolidation is
flushed after each session (``per_session``) or once at the end (``at_end``); then reflection
runs when ``reflect`` is set. The checks are then scored on the memories (observations, insights
and custom memories; never turns):

* ``active`` / ``not_active``: some / no active memory matches;
* ``expired``: some expired memory matches (with ``"superseded": true``, its ``superseded_by``
  names an active memory);
* ``event``: a matching active memory's event range holds ``date``;
* ``recall``: a match in the top ``k`` of ``retrieve(query, now=now)`` over those types;
* ``count_max``: at most ``max`` active memories match;
* ``profile`` (+ ``key``): some current profile value of that key matches, and no current value of
  it holds a ``none`` word (the value stated, changed later, asked "now");
* ``profile_history`` (+ ``key``): some replaced value of that key matches and has its end time
  (with ``"superseded": true``, its ``superseded_by`` names a current value);
* ``entity`` (+ ``name``, optional ``kind``, ``min_mentions``): the ledger holds an entity by that
  name or alias, of that kind, counted at least that often.

A memory matches when each given list holds (case-insensitive substrings): ``any`` (one of),
``all`` (every), ``none`` (none of).

Every recorded message ends done, pending or failed. A *silent loss* is a message marked done
although no memory (of any status) rests on it and the model never gave a verdict on it. The
profile checks are also reported apart, with the profile's values and those resting on no memory.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import ConfigError, ValidationError
from ..person.matching import normalise_name
from ..person.profile import normalise_key
from ..settings import Settings
from ..types import Entity, Memory, MemoryStatus, MemoryType, ProfileValue

CHECK_TYPES = ("active", "not_active", "expired", "event", "no_event", "recall", "count_max", "profile",
               "profile_history", "entity")
PROFILE_CHECKS = ("profile", "profile_history")
MEMORY_TYPES = (MemoryType.OBSERVATION, MemoryType.INSIGHT, MemoryType.CUSTOM)
MESSAGE_GAP = timedelta(seconds=30)
# what a done message may have become without a memory resting on it: a verdict of the model, or
# the engine's rule for messages it never mines (the assistant's words stay searchable as turns)
VERDICT_OUTCOMES = ("kept", "repeat", "nothing worth keeping (model verdict)",
                    "not a fact about the user (model verdict)", "not mined (system or tool message)",
                    "the assistant's words (kept as a turn, not mined for the user's facts)")


def read_scenario_list(path: str | Path) -> list[Any]:
    """The JSON list a scenario file holds (this benchmark's and `bench procedural`'s), unchecked.

    Raises:
        ValidationError: the file is missing, not JSON, or not a non-empty list.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValidationError(f"scenario file not found: {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(f"cannot read scenario file {path}: {type(exc).__name__}") from None
    if not isinstance(data, list) or not data:
        raise ValidationError("a scenario file holds a non-empty JSON list of scenarios")
    return data


def load_scenarios(path: str | Path) -> list[dict[str, Any]]:
    """Read and check a scenario file (see the module docstring).

    Raises:
        ValidationError: the file is missing, not JSON, or not in the scenario format.
    """
    data = read_scenario_list(path)
    for number, scenario in enumerate(data, start=1):
        _check_scenario(scenario, number)
    return data


def _check_scenario(scenario: Any, number: int) -> None:
    where = f"scenario {number}"
    if not isinstance(scenario, dict):
        raise ValidationError(f"{where} is not an object")
    for key in ("name", "user_id", "sessions", "checks"):
        if key not in scenario:
            raise ValidationError(f"{where} lacks {key!r}")
    if scenario.get("consolidate", "per_session") not in ("per_session", "at_end"):
        raise ValidationError(f"{where}: consolidate must be 'per_session' or 'at_end'")
    if not isinstance(scenario["sessions"], list) or not scenario["sessions"]:
        raise ValidationError(f"{where}: sessions must be a non-empty list")
    for session in scenario["sessions"]:
        if not isinstance(session, dict) or not isinstance(session.get("messages"), list):
            raise ValidationError(f"{where}: each session needs a 'messages' list")
        try:
            moment = datetime.fromisoformat(str(session.get("time")))
        except ValueError:
            raise ValidationError(f"{where}: session time {session.get('time')!r} is not ISO 8601") from None
        if moment.tzinfo is None:
            raise ValidationError(f"{where}: session time needs an offset")
        for message in session["messages"]:
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system", "tool") \
                    or not isinstance(message.get("content"), str):
                raise ValidationError(f"{where}: each message needs a role and a content string")
    if not isinstance(scenario["checks"], list):
        raise ValidationError(f"{where}: checks must be a list")
    for check in scenario["checks"]:
        if not isinstance(check, dict) or check.get("type") not in CHECK_TYPES:
            raise ValidationError(f"{where}: unknown check {check!r}; types are {', '.join(CHECK_TYPES)}")
        needed = "key" if check["type"] in PROFILE_CHECKS else "name" if check["type"] == "entity" else None
        if needed is not None and not str(check.get(needed) or "").strip():
            raise ValidationError(f"{where}: a {check['type']} check needs a {needed!r}")


# -------------------------------------------------------------------------------------------------
# Matching and checks


def matches(memory: Memory, check: dict[str, Any]) -> bool:
    """Whether a memory's content satisfies every word list the check gives."""
    return matches_text(memory.content, check)


def matches_text(text: str, check: dict[str, Any]) -> bool:
    """Whether a text satisfies every word list the check gives."""
    text = text.casefold()
    any_of = [str(w).casefold() for w in check.get("any") or []]
    all_of = [str(w).casefold() for w in check.get("all") or []]
    none_of = [str(w).casefold() for w in check.get("none") or []]
    if any_of and not any(word in text for word in any_of):
        return False
    if all_of and not all(word in text for word in all_of):
        return False
    return not any(word in text for word in none_of)


def _holds_date(memory: Memory, day: date) -> bool:
    if memory.event_start is None:
        return False
    zone = memory.event_start.tzinfo
    start = datetime(day.year, day.month, day.day, tzinfo=zone)
    end = start + timedelta(days=1)
    event_end = memory.event_end or (memory.event_start + timedelta(seconds=1))
    return memory.event_start < end and event_end > start


@dataclass
class Person:
    """A scenario's final entity ledger and profile (every value, current and replaced)."""

    entities: list[Entity] = field(default_factory=list)
    profile: list[ProfileValue] = field(default_factory=list)


def evaluate_person(check: dict[str, Any], person: Person) -> bool:
    """Whether a ``profile``, ``profile_history`` or ``entity`` check passes."""
    kind = check["type"]
    if kind == "entity":
        wanted = normalise_name(str(check["name"]))
        found = [e for e in person.entities if wanted in {normalise_name(n) for n in e.names}
                 and (check.get("kind") is None or getattr(e.kind, "value", e.kind) == check["kind"])]
        return any(e.mention_count >= int(check.get("min_mentions", 0)) for e in found)
    key = normalise_key(str(check["key"]))
    values = [v for v in person.profile if v.key == key]
    current = [v for v in values if v.current]
    if kind == "profile":
        stale = [str(w).casefold() for w in check.get("none") or []]
        return any(matches_text(v.value, {**check, "none": []}) for v in current) and \
            not any(word in v.value.casefold() for v in current for word in stale)
    if kind == "profile_history":
        current_ids = {v.id for v in current}
        return any(not v.current and v.valid_to is not None and matches_text(v.value, check)
                   and (not check.get("superseded") or v.superseded_by in current_ids) for v in values)
    raise ValidationError(f"unknown check type {kind!r}")


def evaluate(check: dict[str, Any], memories: list[Memory], recall: Callable[[dict[str, Any]], list[Memory]],
             person: Person | None = None) -> bool:
    """Whether one check passes on a scenario's final memories (and entity ledger and profile)."""
    kind = check["type"]
    if kind in PROFILE_CHECKS or kind == "entity":
        return evaluate_person(check, person or Person())
    active = [m for m in memories if m.status is MemoryStatus.ACTIVE]
    if kind == "active":
        return any(matches(m, check) for m in active)
    if kind == "not_active":
        return not any(matches(m, check) for m in active)
    if kind == "expired":
        active_ids = {m.id for m in active}
        for memory in memories:
            if memory.status is MemoryStatus.EXPIRED and matches(memory, check):
                if not check.get("superseded") or memory.superseded_by in active_ids:
                    return True
        return False
    if kind == "event":
        day = date.fromisoformat(str(check["date"]))
        return any(matches(m, check) and _holds_date(m, day) and (not check.get("open") or m.event_end is None)
                   for m in active)
    if kind == "no_event":  # a state ("works as a nurse") is not dated as an event
        found = [m for m in active if matches(m, check)]
        return bool(found) and all(m.event_start is None for m in found)
    if kind == "recall":
        return any(matches(m, check) for m in recall(check))
    if kind == "count_max":
        return sum(matches(m, check) for m in active) <= int(check.get("max", 1))
    raise ValidationError(f"unknown check type {kind!r}")


# -------------------------------------------------------------------------------------------------
# Running


@dataclass
class _Collected:
    """Reports of every run of one scenario (from the worker thread and from flushes)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    tokens: int = 0
    errors: list[str] = field(default_factory=list)
    rejected: int = 0

    def __call__(self, user_id: str, report: Any) -> None:
        with self.lock:
            self.outcomes.update(report.outcomes)
            self.calls += report.llm_calls
            self.tokens += report.prompt_tokens + report.completion_tokens
            self.errors.extend(report.errors)
            self.rejected += len(report.rejected)


def run_scenario(scenario: dict[str, Any], settings: Settings, workdir: Path) -> dict[str, Any]:
    """Run one scenario on a fresh store under ``workdir``; returns its part of the report."""
    from ..engine import MemoryScope

    user_id, user_name = str(scenario["user_id"]), scenario.get("user_name")
    store = settings.store.model_copy(update={"backend": "sqlite", "path": workdir / "memory.db"})
    consolidation = settings.consolidation.model_copy(update={"worker": "thread", "flush_on_close": False})
    language = scenario.get("language")
    if language in ("en", "zh") and settings.consolidation.language == "auto":
        consolidation = consolidation.model_copy(update={"language": language})
    run_settings = settings.model_copy(update={"store": store, "consolidation": consolidation})
    collected = _Collected()
    record_ms: list[float] = []
    started = time.perf_counter()
    with MemoryScope(run_settings) as engine:
        if not engine.add_consolidation_listener(collected):
            raise ConfigError("the consolidation benchmark needs an LLM: set llm.provider and llm.model")
        recorded: list[str] = []
        for number, session in enumerate(scenario["sessions"], start=1):
            moment = datetime.fromisoformat(session["time"])
            for index, message in enumerate(session["messages"]):
                payload = {"role": message["role"], "content": message["content"],
                           "timestamp": moment + index * MESSAGE_GAP}
                if message["role"] == "user" and user_name:
                    payload["name"] = user_name
                tick = time.perf_counter()
                recorded.extend(engine.record(user_id, payload, session_id=f"{scenario['name']}:{number}"))
                record_ms.append((time.perf_counter() - tick) * 1000)
            if scenario.get("consolidate", "per_session") == "per_session":
                engine.flush()
        engine.flush()
        if scenario.get("reflect"):
            engine.reflect(user_id)
        memories = engine.list(user_id, types=MEMORY_TYPES, include_expired=True, limit=10_000)
        messages = engine.store.recent_messages(user_id, None, None, 100_000)

        def recall(check: dict[str, Any]) -> list[Memory]:
            now = check.get("now")
            result = engine.retrieve(user_id, str(check["query"]), top_k=int(check.get("k", 3)), types=MEMORY_TYPES,
                                     now=now)
            return [scored.memory for scored in result.memories]

        person = Person(entities=list(engine.store.entities(user_id)),
                        profile=list(engine.store.profile_values(user_id)))
        results = [(check, evaluate(check, memories, recall, person)) for check in scenario["checks"]]
    states = {m.id: m.state for m in messages}
    sourced = {source for memory in memories for source in memory.source_ids}
    silent = [m for m in recorded if states.get(m) == "done" and m not in sourced
              and collected.outcomes.get(m) not in VERDICT_OUTCOMES]
    return {
        "name": scenario["name"], "language": scenario.get("language"),
        "checks": {"passed": sum(ok for _, ok in results), "total": len(results)},
        "by_type": _by_type(results),
        "failed": [{"type": c["type"], "what": c.get("what", "")} for c, ok in results if not ok],
        "messages": {"recorded": len(recorded), "done": sum(states.get(m) == "done" for m in recorded),
                     "pending": sum(states.get(m) == "pending" for m in recorded),
                     "failed": sum(states.get(m) == "failed" for m in recorded),
                     "dropped": sum(m not in states for m in recorded)},
        "silent_losses": len(silent),
        "profile": _profile_part(results, person, {m.id for m in memories}),
        "llm": {"calls": collected.calls, "tokens": collected.tokens},
        "errors": len(collected.errors), "insights_refused": collected.rejected,
        "record_ms": record_ms,
        "memories": [{"type": m.type.value, "status": m.status.value, "content": m.content,
                      "event_start": m.event_start.isoformat() if m.event_start else None,
                      "event_end": m.event_end.isoformat() if m.event_end else None,
                      "superseded_by": m.superseded_by} for m in memories],
        "message_outcomes": _message_outcomes(recorded, messages, memories, collected.outcomes),
        "entities": [{"name": e.name, "kind": getattr(e.kind, "value", e.kind), "aliases": list(e.aliases),
                      "mentions": e.mention_count} for e in person.entities],
        "profile_values": [{"key": v.key, "value": v.value, "current": v.current,
                            "valid_from": v.valid_from.isoformat() if v.valid_from else None,
                            "valid_to": v.valid_to.isoformat() if v.valid_to else None} for v in person.profile],
        "seconds": round(time.perf_counter() - started, 2),
    }


def _message_outcomes(recorded: list[str], messages: Iterable[Any], memories: list[Memory],
                      outcomes: dict[str, str]) -> list[dict[str, Any]]:
    """What became of each recorded message: its state, the consolidation outcome, and the
    memories that rest on it (the repeats' targets included), to read a failed check by."""
    by_id = {stored.id: stored for stored in messages}
    out = []
    for message_id in recorded:
        stored = by_id.get(message_id)
        if stored is None:
            continue
        out.append({"role": stored.message.role, "content": stored.message.content, "state": stored.state,
                    "outcome": outcomes.get(message_id),
                    "memories": [f"{m.content} ({m.status.value})" for m in memories if message_id in m.source_ids]})
    return out


def _profile_part(results: list[tuple[dict[str, Any], bool]], person: Person, memory_ids: set[str]) -> dict[str, int]:
    """The profile checks of a scenario, its values, and the values that rest on no memory."""
    checks = [ok for check, ok in results if check["type"] in PROFILE_CHECKS]
    return {"passed": sum(checks), "total": len(checks), "values": len(person.profile),
            "current": sum(v.current for v in person.profile),
            "unsourced": sum(not set(v.source_ids) & memory_ids for v in person.profile)}


def _by_type(results: Iterable[tuple[dict[str, Any], bool]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for check, ok in results:
        entry = out.setdefault(check["type"], {"passed": 0, "total": 0})
        entry["total"] += 1
        entry["passed"] += int(ok)
    return out


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def run_consolidation_bench(path: str | Path, settings: Settings,
                            on_progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every scenario of ``path`` (see the module docstring) and return the report."""
    scenarios = load_scenarios(path)
    if settings.llm.provider == "none":
        raise ConfigError("the consolidation benchmark needs an LLM: set llm.provider and llm.model "
                          "(e.g. MEMORYSCOPE_LLM__PROVIDER=openai MEMORYSCOPE_LLM__BASE_URL=...)")
    started = time.perf_counter()
    parts = []
    with tempfile.TemporaryDirectory(prefix="memoryscope-bench-") as tmp:
        for number, scenario in enumerate(scenarios, start=1):
            workdir = Path(tmp) / f"s{number}"
            workdir.mkdir()
            part = run_scenario(scenario, settings, workdir)
            parts.append(part)
            if on_progress:
                on_progress(f"[{number}/{len(scenarios)}] {part['name']}: {part['checks']['passed']}/"
                            f"{part['checks']['total']} checks, {part['llm']['calls']} LLM calls, "
                            f"{part['seconds']:.0f} s")
    return summarise(parts, settings, time.perf_counter() - started)


def summarise(parts: list[dict[str, Any]], settings: Settings, seconds: float) -> dict[str, Any]:
    """The whole report from the scenarios' parts."""
    by_type: dict[str, dict[str, int]] = {}
    for part in parts:
        for kind, counts in part["by_type"].items():
            entry = by_type.setdefault(kind, {"passed": 0, "total": 0})
            entry["passed"] += counts["passed"]
            entry["total"] += counts["total"]
    messages = {key: sum(p["messages"][key] for p in parts) for key in ("recorded", "done", "pending", "failed",
                                                                          "dropped")}
    calls = sum(p["llm"]["calls"] for p in parts)
    tokens = sum(p["llm"]["tokens"] for p in parts)
    record_ms = [v for p in parts for v in p["record_ms"]]
    return {
        "checks": {"passed": sum(p["checks"]["passed"] for p in parts),
                   "total": sum(p["checks"]["total"] for p in parts), "by_type": by_type},
        "messages": messages,
        "silent_losses": sum(p["silent_losses"] for p in parts),
        "profile": {key: sum(p["profile"][key] for p in parts)
                    for key in ("passed", "total", "values", "current", "unsourced")},
        "llm": {"calls": calls, "tokens": tokens, "model": settings.llm.model,
                "calls_per_message": round(calls / max(1, messages["recorded"]), 3),
                "tokens_per_message": round(tokens / max(1, messages["recorded"]), 1)},
        "record_ms": {"p50": round(_percentile(record_ms, 0.5), 2), "p95": round(_percentile(record_ms, 0.95), 2),
                      "n": len(record_ms)},
        "seconds": round(seconds, 1),
        "scenarios": [{key: value for key, value in p.items() if key != "record_ms"} for p in parts],
    }


def format_table(report: dict[str, Any]) -> str:
    """The report as Markdown tables (per check type and per scenario)."""
    checks = report["checks"]
    lines = [f"Consolidation benchmark: {checks['passed']}/{checks['total']} checks "
             f"({checks['passed'] / max(1, checks['total']):.0%}), model {report['llm']['model']}", "",
             "| check type | passed | total | share |", "|---|---|---|---|"]
    for kind in CHECK_TYPES:
        counts = checks["by_type"].get(kind)
        if counts:
            lines.append(f"| {kind} | {counts['passed']} | {counts['total']} | "
                         f"{counts['passed'] / max(1, counts['total']):.0%} |")
    lines += ["", "| scenario | checks | LLM calls | failed checks |", "|---|---|---|---|"]
    for part in report["scenarios"]:
        failed = "; ".join(f"{f['type']}: {f['what']}" for f in part["failed"]) or "-"
        lines.append(f"| {part['name']} | {part['checks']['passed']}/{part['checks']['total']} | "
                     f"{part['llm']['calls']} | {failed} |")
    m, profile = report["messages"], report["profile"]
    lines += ["", f"profile: {profile['passed']}/{profile['total']} checks, {profile['current']} current of "
                  f"{profile['values']} values, {profile['unsourced']} resting on no memory",
              f"messages: {m['recorded']} recorded, {m['done']} done, {m['pending']} pending, "
                  f"{m['failed']} failed, {m['dropped']} dropped; silent losses: {report['silent_losses']}",
              f"LLM: {report['llm']['calls']} calls, {report['llm']['tokens']} tokens "
              f"({report['llm']['calls_per_message']} calls and {report['llm']['tokens_per_message']} tokens "
              f"per message); record p50 {report['record_ms']['p50']} ms, p95 {report['record_ms']['p95']} ms "
              f"while the worker runs; {report['seconds']} s"]
    return "\n".join(lines)
