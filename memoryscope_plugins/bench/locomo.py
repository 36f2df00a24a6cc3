"""The LoCoMo retrieval benchmark, run through the public API only.

For each conversation of a file in LoCoMo's format, every dialog turn is recorded with
`MemoryScope.record` (its speaker, its session's date and time, image turns with their caption as
"[shares ...]"), then every question is asked with `MemoryScope.retrieve` against that
conversation's memories only (one user per conversation), with `now` after the last session.
recall@k = |gold turns in the top k| / |gold turns|, averaged over questions; hit@k = any gold turn
in the top k. Evidence ids are normalised as the reference script does. The data is never shipped:
it is read from the path given.

Mode "observations" indexes LoCoMo's own per-session observation lists as `observation` memories
(each names the turns it came from); a retrieved observation covers the gold turns it names.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from ..engine import MemoryScope
from ..settings import Settings
from ..types import MemoryType, Message
from .cosine_baseline import CosineBaseline

KS = (1, 3, 5, 10, 20)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass
class Session:
    number: int
    when: datetime
    turns: list[Turn]
    observations: list[tuple[str, list[str]]] = field(default_factory=list)  # (text, dia ids)


@dataclass
class Question:
    text: str
    category: int
    gold: list[str]
    tags: tuple[str, ...] = ()
    stale: list[str] = field(default_factory=list)  # superseded evidence of an `update` question
    answer: str = ""  # the gold answer (bench qa); "" when the file gives none
    number: int = -1  # the question's position in its conversation's `qa` list


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question]


def parse_locomo_time(text: str) -> datetime:
    """LoCoMo's session stamps, e.g. "1:56 pm on 8 May, 2023" (taken as UTC)."""
    cleaned = re.sub(r"\s+", " ", text.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date {text!r}")


def normalise_evidence(evidence: Sequence[Any], valid_ids: set[str]) -> list[str]:
    """Split "D8:6; D9:17", fix "D:11:26" and "D30:05", drop ids that name no turn."""
    out: list[str] = []
    for item in evidence:
        for part in re.split(r"[;,\s]+", str(item)):
            match = re.match(r"^D:?(\d+):0*(\d+)$", part.strip())
            if not match:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in valid_ids and dia_id not in out:
                out.append(dia_id)
    return out


def load_conversations(path: str | Path, *, require_evidence: bool = True) -> list[Conversation]:
    """Read a file in the format of LoCoMo's locomo10.json. Questions whose evidence names no turn
    are dropped unless `require_evidence` is False (question answering needs only the answer)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(raw, list):
        raise ValueError("a LoCoMo file is a JSON list of conversations")
    conversations = []
    for sample in raw:
        conv = sample["conversation"]
        observations = sample.get("observation") or {}
        sessions = []
        for number in sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key))):
            turns = []
            for turn in conv[f"session_{number}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                turns.append(Turn(turn["dia_id"], turn["speaker"], text))
            obs = []
            for per_speaker in (observations.get(f"session_{number}_observation") or {}).values():
                for entry in per_speaker:
                    ids = entry[1] if isinstance(entry[1], list) else [entry[1]]
                    obs.append((entry[0], [str(i) for i in ids]))
            sessions.append(Session(number, parse_locomo_time(conv[f"session_{number}_date_time"]), turns, obs))
        valid = {t.dia_id for s in sessions for t in s.turns}
        questions = [Question(qa["question"], int(qa["category"]), normalise_evidence(qa.get("evidence", []), valid),
                              tuple(str(t) for t in qa.get("tags") or ()),
                              normalise_evidence(qa.get("stale_evidence") or [], valid),
                              _answer_text(qa.get("answer", qa.get("adversarial_answer"))), number)
                     for number, qa in enumerate(sample["qa"])]
        conversations.append(Conversation(sample["sample_id"], (conv["speaker_a"], conv["speaker_b"]),
                                          sessions, [q for q in questions if q.gold or not require_evidence]))
    return conversations


def _answer_text(value: Any) -> str:
    """LoCoMo gives some answers as numbers (2022) or lists; the gold answer as one string."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, interpolated between ranks; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ingest(memory: MemoryScope, conv: Conversation, mode: str) -> int:
    """Record a conversation as the benchmark does (mode "turns": every dialog turn with its speaker and
    time; "observations": LoCoMo's observations as `observation` memories); returns how many."""
    count = 0
    for session in conv.sessions:
        if mode == "turns":
            for i, turn in enumerate(session.turns):
                role = "user" if turn.speaker == conv.speakers[0] else "assistant"
                memory.record(conv.id, [Message(role=role, content=turn.text, name=turn.speaker,
                                                timestamp=session.when + timedelta(seconds=i),
                                                metadata={"dia_id": turn.dia_id})],
                              session_id=f"session_{session.number}")
                count += 1
        else:
            for text, ids in session.observations:
                memory.add(conv.id, text, type=MemoryType.OBSERVATION, created_at=session.when,
                           metadata={"dia_ids": ids})
                count += 1
    return count


def covered_turns(metadata: dict[str, Any]) -> list[str]:
    """The LoCoMo turn ids (dia ids) a retrieved memory covers, from its metadata."""
    if "dia_id" in metadata:
        return [metadata["dia_id"]]
    return list(metadata.get("dia_ids", []))


def _stale_first(ranked: list[list[str]], gold: set[str], stale: list[str]) -> bool | None:
    """For a question with superseded evidence: does a stale turn rank above every gold turn
    (a gold turn outside the results ranks last)? None when the question names no stale turn."""
    if not stale:
        return None
    first: dict[str, int] = {}
    for rank, ids in enumerate(ranked):
        for i in ids:
            first.setdefault(i, rank)
    best_stale = min((first[i] for i in stale if i in first), default=None)
    best_gold = min((first[i] for i in gold if i in first), default=len(ranked))
    return best_stale is not None and best_stale < best_gold


def _tag_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall and hit per question tag (categories 1-4), with the same figures for the questions
    without that tag, and for `update` questions how often a stale turn outranks the current one."""
    scored = [r for r in rows if r["category"] != 5]
    tags = sorted({t for r in scored for t in r["tags"]})
    out: dict[str, Any] = {}
    for tag in tags:
        for label, chosen in ((tag, [r for r in scored if tag in r["tags"]]),
                              (f"not {tag}", [r for r in scored if tag not in r["tags"]])):
            if not chosen:
                continue
            entry: dict[str, Any] = {"n": len(chosen)}
            for metric in ("recall", "hit"):
                entry[metric] = {str(k): statistics.fmean(r[metric][k] for r in chosen) for k in KS}
            stale = [r["stale_first"] for r in chosen if r["stale_first"] is not None]
            if stale and label == tag:
                entry["stale_outranks_rate"] = statistics.fmean(float(x) for x in stale)
                entry["n_with_stale"] = len(stale)
            out[label] = entry
    return out


BASELINES = ("cosine",)


def run_locomo(data: str | Path, *, mode: str = "turns", settings: Settings | None = None,
               workdir: str | Path | None = None, limit_conversations: int | None = None,
               on_progress: Callable[[str], None] | None = None, baselines: Sequence[str] = ()) -> dict[str, Any]:
    """Run the benchmark and return the report dict (see module docstring for the metric). `baselines`:
    also rank every question by these (``"cosine"``: `cosine_baseline.CosineBaseline`) over the same
    memories, reported under ``baselines``."""
    if mode not in ("turns", "observations"):
        raise ValueError("mode is 'turns' or 'observations'")
    unknown = sorted(set(baselines) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; known: {', '.join(BASELINES)}")
    conversations = load_conversations(data)[:limit_conversations]
    settings = settings or Settings()
    tmp = tempfile.TemporaryDirectory(prefix="memoryscope-bench-") if workdir is None else None
    folder = Path(tmp.name) if tmp is not None else Path(workdir or ".")
    folder.mkdir(parents=True, exist_ok=True)
    store_path = folder / "locomo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store_path) + suffix).unlink(missing_ok=True)
    settings = settings.model_copy(update={
        "store": settings.store.model_copy(update={"backend": "sqlite", "path": store_path}),
        "consolidation": settings.consolidation.model_copy(update={"enabled": False})})
    runs = {name: _Run() for name in ("engine", *dict.fromkeys(baselines))}
    try:
        with MemoryScope(settings) as memory:
            memory.retrieve("warm-up", "warm up the query path")  # loads the model once
            for conv in conversations:
                start = time.perf_counter()
                runs["engine"].memories += ingest(memory, conv, mode)
                runs["engine"].ingest_ms += (time.perf_counter() - start) * 1000.0
                _ask(memory, conv, runs)
                if on_progress:
                    on_progress(f"{conv.id}: {runs['engine'].memories} memories, {len(runs['engine'].rows)} questions")
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = {"mode": mode, "config": settings.redacted(), "data": str(data), "n_conversations": len(conversations),
              **runs.pop("engine").report()}
    if runs:
        report["baselines"] = {name: run.report() for name, run in runs.items()}
    return report


@dataclass
class _Run:
    """What one ranking method gathered over the run: a row per question, latencies, ingest cost."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    steps_ms: dict[str, list[float]] = field(default_factory=dict)
    memories: int = 0
    ingest_ms: float = 0.0

    def add(self, question: Question, ranked: list[list[str]], spent_ms: float) -> None:
        """One question's ranked memories (each as the turn ids it covers) and how long it took."""
        gold = set(question.gold)
        recall, hit = {}, {}
        for k in KS:
            found = gold & {i for ids in ranked[:k] for i in ids}
            recall[k] = len(found) / len(gold)
            hit[k] = float(bool(found))
        self.search_ms.append(spent_ms)
        self.rows.append({"category": question.category, "recall": recall, "hit": hit, "tags": question.tags,
                          "stale_first": _stale_first(ranked, gold, question.stale)})

    def report(self) -> dict[str, Any]:
        groups = {"1-4": {1, 2, 3, 4}, **{str(c): {c} for c in range(1, 6)}}

        def mean_of(metric: str, cats: set[int]) -> dict[str, float] | None:
            chosen = [r for r in self.rows if r["category"] in cats]
            if not chosen:
                return None
            return {str(k): statistics.fmean(r[metric][k] for r in chosen) for k in KS}

        return {
            "n_memories": self.memories,
            "n_queries": len(self.rows),
            "n_queries_by_category": {name: sum(1 for r in self.rows if r["category"] in cats)
                                      for name, cats in groups.items()},
            "recall": {name: mean_of("recall", cats) for name, cats in groups.items()},
            "hit": {name: mean_of("hit", cats) for name, cats in groups.items()},
            "tags": _tag_report(self.rows),
            "search_ms": {"p50": percentile(self.search_ms, 50), "p95": percentile(self.search_ms, 95),
                          "mean": statistics.fmean(self.search_ms) if self.search_ms else float("nan")},
            "search_steps_ms": {step: {"p50": percentile(v, 50), "p95": percentile(v, 95)}
                                for step, v in self.steps_ms.items() if step != "total_ms"},
            "ingest_ms_per_memory": self.ingest_ms / max(self.memories, 1),
        }


def _ask(memory: MemoryScope, conv: Conversation, runs: dict[str, _Run]) -> None:
    """Every question of `conv`, ranked by the engine (`retrieve`) and by each baseline of `runs`."""
    now = conv.sessions[-1].when + timedelta(days=1)
    cosine = CosineBaseline.of_user(memory, conv.id) if "cosine" in runs else None
    for question in conv.questions:
        start = time.perf_counter()
        result = memory.retrieve(conv.id, question.text, top_k=max(KS), now=now)
        spent = (time.perf_counter() - start) * 1000.0
        for step, took in result.timings_ms.items():
            runs["engine"].steps_ms.setdefault(step, []).append(took)
        runs["engine"].add(question, [covered_turns(item.memory.metadata) for item in result.memories], spent)
        if cosine is not None:
            found, spent = cosine.rank(memory, question.text, max(KS))
            runs["cosine"].add(question, [covered_turns(m.metadata) for m in found], spent)
    if cosine is not None:
        runs["cosine"].memories += len(cosine.memories)


def format_table(report: dict[str, Any]) -> str:
    """The report as Markdown tables (recall and hit per category group, tags, latency), then each
    baseline's recall and hit."""
    lines = [f"LoCoMo retrieval, mode={report['mode']}, {report['n_conversations']} conversations, "
             f"{report['n_memories']} memories, {report['n_queries']} questions", ""]
    lines += _metric_tables(report)
    lines += _tag_table(report.get("tags") or {})
    lines += _latency_lines(report)
    for name, baseline in (report.get("baselines") or {}).items():
        lines += ["", f"Baseline {name!r} ({BASELINE_NAMES.get(name, name)}), the same memories and questions:", ""]
        lines += _metric_tables(baseline)
        lines.append(f"search p50 {baseline['search_ms']['p50']:.2f} ms, p95 {baseline['search_ms']['p95']:.2f} ms "
                     "(the query's embedding and one matrix product)")
    return "\n".join(lines)


BASELINE_NAMES = {"cosine": "plain cosine: the embedder over each memory's dated words, nothing else"}


def _metric_tables(report: dict[str, Any]) -> list[str]:
    lines = []
    for metric in ("recall", "hit"):
        lines.append(f"| {metric} | n | " + " | ".join(f"@{k}" for k in KS) + " |")
        lines.append("|---|---|" + "---|" * len(KS))
        for name, values in report[metric].items():
            if values is None:
                continue
            label = name if name == "1-4" else f"{name} {CATEGORY_NAMES[int(name)]}"
            lines.append(f"| {label} | {report['n_queries_by_category'][name]} | "
                         + " | ".join(f"{values[str(k)]:.3f}" for k in KS) + " |")
        lines.append("")
    return lines


def _tag_table(tags: dict[str, Any]) -> list[str]:
    if not tags:
        return []
    lines = ["| tag (categories 1-4) | n | " + " | ".join(f"R@{k}" for k in KS) + " | stale first |",
             "|---|---|" + "---|" * (len(KS) + 1)]
    for label, entry in tags.items():
        stale = entry.get("stale_outranks_rate")
        stale_cell = "" if stale is None else f"{stale:.3f} of {entry['n_with_stale']}"
        lines.append(f"| {label} | {entry['n']} | " + " | ".join(f"{entry['recall'][str(k)]:.3f}" for k in KS)
                     + f" | {stale_cell} |")
    return [*lines, ""]


def _latency_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"search p50 {report['search_ms']['p50']:.2f} ms, p95 {report['search_ms']['p95']:.2f} ms; "
             f"ingest {report['ingest_ms_per_memory']:.2f} ms per memory"]
    steps = report.get("search_steps_ms") or {}
    if steps:
        lines.append("search steps p50: " + ", ".join(
            f"{step.removesuffix('_ms')} {v['p50']:.2f} ms" for step, v in steps.items()))
        embed = steps.get("embed_ms", {}).get("p50")
        if embed:
            lines.append(f"retrieval p50 / the query embedding's p50: {report['search_ms']['p50'] / embed:.2f}")
    return lines
