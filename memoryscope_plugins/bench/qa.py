"""`bench qa`: does the agent answer right? LoCoMo-style question answering, judged.

For a file in LoCoMo's format (`bench.locomo.load_conversations`), a sample of questions is
answered by the configured `llm` once per configuration, each from a different context:

* ``none``: the question alone;
* ``full``: the whole conversation (conversation first, question last, so a llama.cpp server
  reuses the cached prefix across a conversation's questions); skipped, with the reason, when
  the prompt is estimated above ``max_context_tokens``;
* ``vector``: plain cosine top-k over the turns with the same embedder (how mem0's search
  ranks), lines "[date] Speaker: text";
* ``turns``: our default ``retrieve`` over the recorded turns, the context block exactly as the
  adapters inject it (`retrieval.injection.result_block`, the default template);
* ``observations``: LoCoMo's own observations as memories (like ``bench locomo --mode
  observations``), through ``retrieve`` and the same block;
* ``consolidated``: the turns recorded into a store whose consolidation runs with the configured
  `llm` (observations, insights), then ``retrieve`` and the same block (slow: many LLM calls per
  conversation, counted apart in ``consolidation``).

Every configuration gets the same prompt (`answer_messages`): the memory block in the system
message, then the current date and the question in the user message. Each question is asked
at ``now`` = one hour after its conversation's last session. Calls are ordered for a local
server's prompt cache: per conversation, each configuration's questions one after another
(``full`` last), and judging (`qa_judge`) only after all answering. The output file is the
state: it is rewritten atomically after every answer and verdict, so a rerun with the same
``--out`` continues where it stopped (and may add configurations); a rerun whose sample or
file-wide settings differ is refused. The settings only some configurations depend on (the
embedder, retrieval and consolidation settings: `config_settings`) are recorded per
configuration: a rerun answers a configuration again when its recorded ones differ from the
current ones, and ``--redo`` answers one again when only the code changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import MemoryScope
from ..errors import MemoryScopeError, ModelError, ValidationError
from ..models.base import ChatModel, ChatResult
from ..models.factory import build_llm
from ..retrieval.injection import render_block, result_block
from ..settings import LLMSettings, Settings
from ..timeparse import detect_language, format_memory_time
from ..validation import check_int
from .locomo import (
    CATEGORY_NAMES,
    Conversation,
    Question,
    ingest,
    load_conversations,
    percentile,
)
from .qa_judge import deterministic_verdict, judge_messages, parse_verdict
from .qa_metrics import contains, token_f1

CONFIGS = ("none", "full", "vector", "turns", "observations", "consolidated")
# per conversation: the short prompts first, `full` last (its long prefix then stays cached)
ANSWER_ORDER = ("none", "vector", "turns", "observations", "consolidated", "full")
FORMAT = "memoryscope-bench-qa/2"
# /1 kept the embedder and a digest of the retrieval settings in the file-wide spec; it is read and
# turned into /2 (`_upgrade_v1`)
FORMAT_V1 = "memoryscope-bench-qa/1"
ANSWER_MAX_TOKENS = 96
FULL_LOCAL_TIMEOUT_S = 3600.0
JUDGE_MAX_TOKENS = 48
_CONTEXT_REFUSED = re.compile(r"context|too long|too many tokens|maximum.{0,20}length|exceed", re.IGNORECASE)
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the word OK."}]


class QAInputError(MemoryScopeError):
    """Bad input to `bench qa` (file, configuration, settings, unreachable model): nothing written."""


# ---------------------------------------------------------------------------------------------
# Prompts

ANSWER_SYSTEM = {
    "en": "You are an assistant with a long-term memory of your past conversations with the user. "
          "Answer the user's question from the memories below. Dates matter: a memory's date is when it was "
          "said, so work out \"yesterday\" or \"last week\" from that date.",
    "zh": "你是一个拥有长期记忆的助手，记得与用户过去的对话。请根据下面的记忆回答用户的问题。注意日期：记忆的日期是"
          "那句话说出的日期，\"昨天\"、\"上周\"要从那个日期推算。",
}
ANSWER_USER = {
    "en": "Current date: {now}\nQuestion: {question}\nAnswer in a short phrase.",
    "zh": "当前日期：{now}\n问题：{question}\n请用简短的短语回答。",
}


def answer_messages(block: str, question: str, now_text: str, language: str) -> list[dict[str, str]]:
    """The answering prompt of every configuration: instructions and memory block (system),
    then the current date and the question (user)."""
    system = ANSWER_SYSTEM[language] + (f"\n\n{block}" if block else "")
    return [{"role": "system", "content": system},
            {"role": "user", "content": ANSWER_USER[language].format(now=now_text, question=question)}]


def turn_line(when: datetime, speaker: str, text: str, language: str) -> str:
    """One turn as the `vector` and `full` contexts show it: "[2023-05-08 Mon] Caroline: text"."""
    return f"[{format_memory_time(when, language)}] {speaker}: {text}"


def estimate_tokens(text: str) -> float:
    """A cheap token estimate: a CJK character is about one token, other text four characters."""
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    return cjk + (len(text) - cjk) / 4.0


# ---------------------------------------------------------------------------------------------
# Sampling


def question_id(conv: Conversation, question: Question) -> str:
    return f"{conv.id}:q{question.number}"


def stratified_sample(items: Sequence[tuple[Conversation, Question]], limit: int | None,
                      seed: int) -> list[tuple[Conversation, Question]]:
    """`limit` questions spread over the categories in proportion to their counts (largest
    remainders round up, ties to the smaller category number), chosen with `seed`; returned in
    file order. None or a limit >= the pool returns every question."""
    if limit is None or limit >= len(items):
        return list(items)
    by_category: dict[int, list[int]] = {}
    for index, (_conv, question) in enumerate(items):
        by_category.setdefault(question.category, []).append(index)
    shares = {c: limit * len(idx) / len(items) for c, idx in by_category.items()}
    quota = {c: math.floor(s) for c, s in shares.items()}
    leftover = limit - sum(quota.values())
    for c in sorted(shares, key=lambda c: (-(shares[c] - quota[c]), c))[:leftover]:
        quota[c] += 1
    chosen: list[int] = []
    for category in sorted(by_category):
        rng = random.Random(f"{seed}:{category}")
        chosen.extend(rng.sample(by_category[category], quota[category]))
    return [items[i] for i in sorted(chosen)]


# ---------------------------------------------------------------------------------------------
# The model, counted


@dataclass
class CountedModel:
    """A chat model whose calls and tokens are counted (answer and judge calls apart)."""

    model: ChatModel
    counts: dict[str, int] = field(default_factory=lambda: {"calls": 0, "prompt_tokens": 0,
                                                            "completion_tokens": 0})

    def chat(self, messages: list[dict[str, str]], max_tokens: int) -> ChatResult:
        self.counts["calls"] += 1
        result = self.model.chat(messages, max_tokens=max_tokens)
        self.counts["prompt_tokens"] += result.usage.prompt_tokens
        self.counts["completion_tokens"] += result.usage.completion_tokens
        return result


# ---------------------------------------------------------------------------------------------
# Options and the state file


@dataclass
class QAOptions:
    data: Path
    configs: list[str]
    out: Path | None = None
    limit: int | None = None
    seed: int = 0
    categories: tuple[int, ...] = (1, 2, 3, 4)
    top_k: int | None = None
    max_context_tokens: int = 30000
    rejudge: bool = False  # decide every answer again (after the rules changed); LLM verdicts are kept
    redo: list[str] = field(default_factory=list)  # configurations to answer again (their verdicts too)


def parse_configs(text: str, option: str = "--configs") -> list[str]:
    """"none,turns" -> ["none", "turns"]; an unknown name or none at all is a `QAInputError`
    (naming `option` unless it is --configs); a repeated name counts once."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONFIGS]
    if unknown or not names:
        where = "" if option == "--configs" else f" in {option}"
        raise QAInputError(f"unknown configuration {', '.join(unknown) or '(none given)'}{where}: "
                           f"choose from {', '.join(CONFIGS)}")
    return list(dict.fromkeys(names))


def parse_categories(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        values = ()
    if not values or any(v not in CATEGORY_NAMES for v in values):
        raise QAInputError(f"--categories takes numbers 1-5 separated by commas, not {text!r}")
    return values


def _model_identity(cfg: LLMSettings) -> dict[str, Any]:
    return {"provider": cfg.provider, "model": cfg.model, "base_url": cfg.base_url,
            "temperature": cfg.temperature, "extra_body": cfg.extra_body}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def build_spec(options: QAOptions, settings: Settings, judge: LLMSettings, ids: list[str]) -> dict[str, Any]:
    """What must match for a rerun to continue a file: the sample and every setting that changes
    every configuration's answers or verdicts (the configurations may differ: a rerun can add
    some). What only some configurations depend on is in `config_settings`."""
    return {
        "data_sha256": hashlib.sha256(options.data.read_bytes()).hexdigest(),
        "limit": options.limit, "seed": options.seed, "categories": list(options.categories),
        "top_k": options.top_k, "max_context_tokens": options.max_context_tokens,
        "questions_sha256": _digest(ids),
        "llm": _model_identity(settings.llm), "judge": _model_identity(judge),
        "language": settings.language,
    }


def _embedder_identity(settings: Settings) -> dict[str, Any]:
    """What makes the embedder's vectors (not its batch size, threads, timeouts or key)."""
    cfg = settings.embedder
    return {"provider": cfg.provider, "model": cfg.model, "base_url": cfg.base_url,
            "dimensions": cfg.dimensions, "int8_compute": cfg.int8_compute}


# consolidation settings the bench sets itself (`QARun.open_stores`) or that only schedule work
_CONSOLIDATION_NOT_RECORDED = {"enabled", "worker", "flush_on_close", "threads", "lease_ttl_s", "close_timeout_s",
                               "max_backoff_s", "every_seconds"}


def config_settings(name: str, options: QAOptions, settings: Settings) -> dict[str, Any]:
    """The settings a configuration's answers depend on beyond the file-wide spec: the embedder
    (vector, turns, observations, consolidated), the retrieval settings (turns, observations,
    consolidated; `vector` only the number of lines, `--top-k` or retrieval.top_k) and the
    consolidation settings (consolidated). `none` and `full` depend on none of them."""
    if name in ("none", "full"):
        return {}
    record: dict[str, Any] = {"embedder": _embedder_identity(settings)}
    if name == "vector":
        record["top_k"] = options.top_k or settings.retrieval.top_k
        return record
    record["retrieval"] = settings.retrieval.model_dump(mode="json")
    if name == "consolidated":
        record["consolidation"] = settings.consolidation.model_dump(mode="json", exclude=_CONSOLIDATION_NOT_RECORDED)
    return record


_SETTING_GROUPS = {"embedder": "embedder", "retrieval": "retrieval settings", "retrieval_sha256": "retrieval settings",
                   "top_k": "retrieval settings", "consolidation": "consolidation settings"}


def changed_settings(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The kinds of setting ("embedder", "retrieval settings", ...) whose recorded value differs."""
    keys = [key for key in sorted(set(recorded) | set(current)) if recorded.get(key) != current.get(key)]
    return list(dict.fromkeys(_SETTING_GROUPS.get(key, key) for key in keys))


def write_atomically(path: Path, state: Any) -> None:
    """Replace `path` with `state` as JSON in one step (a crash leaves the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(state, out, indent=1, ensure_ascii=False)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _load_previous(path: Path | None, spec: dict[str, Any], options: QAOptions,
                   settings: Settings) -> dict[str, Any] | None:
    if path is None or not path.exists():
        return None
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise QAInputError(f"{path} exists but is not a bench qa result ({exc}); choose another --out") from None
    if not isinstance(previous, dict) or previous.get("format") not in (FORMAT, FORMAT_V1) \
            or not isinstance(previous.get("spec"), dict) or not isinstance(previous.get("questions"), list):
        raise QAInputError(f"{path} exists but is not a bench qa result; choose another --out")
    if previous["format"] == FORMAT_V1:
        previous = _upgrade_v1(previous, options, settings)
    if previous.get("spec") != spec:
        differing = sorted(k for k in set(spec) | set(previous.get("spec") or {})
                           if spec.get(k) != (previous.get("spec") or {}).get(k))
        raise QAInputError(f"{path} was made with other settings or another sample ({', '.join(differing)} "
                           "differ); rerun with the same ones or choose another --out")
    return previous


def _upgrade_v1(previous: dict[str, Any], options: QAOptions, settings: Settings) -> dict[str, Any]:
    """A /1 file as /2: its spec without the embedder and the retrieval digest, which become each
    answered configuration's record. /1 kept only the embedder's provider and model, a digest of
    the retrieval settings and no consolidation settings: where those equal the current ones the
    record is the current settings (consolidation settings included: /1 did not tell them
    apart), where they differ the record keeps the old value, so the configuration is answered
    again. `vector` with no --top-k took its lines from retrieval.top_k: a changed digest
    answers it again too."""
    upgraded = dict(previous)
    old_spec = dict(previous["spec"])
    old_embedder = old_spec.pop("embedder", None)
    old_retrieval = old_spec.pop("retrieval_sha256", None)
    same_embedder = old_embedder == {"provider": settings.embedder.provider, "model": settings.embedder.model}
    same_retrieval = old_retrieval == _digest(settings.retrieval.model_dump(mode="json"))
    answered = {name for row in previous["questions"] if isinstance(row, dict)
                for name in (row.get("answers") or {})}
    records: dict[str, dict[str, Any]] = {}
    for name in sorted(answered & set(CONFIGS), key=CONFIGS.index):
        record = config_settings(name, options, settings)
        if "embedder" in record and not same_embedder:
            record["embedder"] = old_embedder
        if not same_retrieval:
            if "retrieval" in record:
                record["retrieval_sha256"] = old_retrieval
                del record["retrieval"]
            elif name == "vector" and options.top_k is None:
                record["retrieval_sha256"] = old_retrieval
                del record["top_k"]
        records[name] = record
    upgraded.update(format=FORMAT, spec=old_spec, settings_by_config=records)
    return upgraded


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class QAStores:
    """The conversation stores: turns (for `turns` and `vector`), observations, and consolidated
    (when asked for), one user per conversation, each filled once per run and only when a
    configuration still needs it."""

    turns: MemoryScope
    observations: MemoryScope
    consolidated: MemoryScope | None = None
    recorded: set[tuple[str, str]] = field(default_factory=set)
    turn_vectors: dict[str, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    consolidation: dict[str, dict[str, Any]] = field(default_factory=dict)

    def ensure(self, conv: Conversation, kind: str) -> None:
        if (conv.id, kind) in self.recorded:
            return
        if kind == "turns":
            ingest(self.turns, conv, "turns")
        elif kind == "observations":
            ingest(self.observations, conv, "observations")
        else:
            assert self.consolidated is not None
            ingest(self.consolidated, conv, "turns")
            report = self.consolidated.consolidate(conv.id)
            pending = self.consolidated.store.recent_messages(conv.id, None, None, 1_000_000)
            self.consolidation[conv.id] = {
                "llm_calls": report.llm_calls, "prompt_tokens": report.prompt_tokens,
                "completion_tokens": report.completion_tokens, "messages": report.messages,
                "failed_messages": report.failed_messages, "errors": len(report.errors),
                "left_pending": sum(1 for m in pending if m.state == "pending"),
                "memories": len(self.consolidated.list(conv.id, types=["observation", "insight"], limit=10_000))}
        self.recorded.add((conv.id, kind))

    def vector_lines(self, conv: Conversation, language: str) -> tuple[list[str], np.ndarray]:
        """Every turn as a "[date] Speaker: text" line and its vector (the same embedder)."""
        if conv.id not in self.turn_vectors:
            lines, texts = [], []
            for session in conv.sessions:
                for turn in session.turns:
                    lines.append(turn_line(session.when, turn.speaker, turn.text, language))
                    texts.append(f"{turn.speaker}: {turn.text}")
            vectors = self.turns.embedder.embed(texts, kind="document") if texts else np.zeros((0, 1))
            self.turn_vectors[conv.id] = (lines, np.asarray(vectors, dtype=np.float32))
        return self.turn_vectors[conv.id]


def _language(settings: Settings, text: str) -> str:
    return settings.language if settings.language in ("en", "zh") else detect_language(text)


def question_time(conv: Conversation) -> datetime:
    """The moment a conversation's questions are asked: one hour after its last session began
    (after its last turn, whose stamps are a second apart)."""
    return conv.sessions[-1].when + timedelta(hours=1)


def _full_context(conv: Conversation, language: str) -> str:
    return "\n".join(turn_line(s.when, t.speaker, t.text, language) for s in conv.sessions for t in s.turns)


class QARun:
    """One `bench qa` run over a sample (see the module docstring)."""

    def __init__(self, options: QAOptions, settings: Settings, judge_settings: LLMSettings | None = None,
                 *, progress: bool = True) -> None:
        self.options = options
        self.settings = settings
        self.judge_settings = judge_settings or settings.llm
        self.progress = progress
        if settings.llm.provider == "none" or not settings.llm.model:
            raise QAInputError("bench qa needs an answering model: set llm.provider and llm.model in the settings")
        if self.judge_settings.provider == "none" or not self.judge_settings.model:
            raise QAInputError("bench qa needs a judge model: give --judge-model/--judge-provider or llm settings")
        self.items = self._load_sample()
        ids = [question_id(c, q) for c, q in self.items]
        self.spec = build_spec(options, settings, self.judge_settings, ids)
        unrun = [name for name in options.redo if name not in options.configs]
        if unrun:
            raise QAInputError(f"--redo {','.join(unrun)}: not in --configs {','.join(options.configs)} "
                               "(a configuration is answered again only in a run that runs it)")
        previous = _load_previous(options.out, self.spec, options, settings)
        self.state = previous or {"format": FORMAT, "spec": self.spec, "configs": {}, "questions": [
            {"id": question_id(c, q), "conversation": c.id, "category": q.category, "question": q.text,
             "gold": q.answer, "language": _language(settings, q.text), "now": question_time(c).isoformat(),
             "answers": {}} for c, q in self.items], "llm": {"calls": 0, "tokens": 0}, "seconds": 0.0,
            "settings_by_config": {}}
        self._redo = self._plan_redo()
        self.state["configs_requested"] = sorted(set(self.state.get("configs_requested", [])) | set(options.configs),
                                                 key=CONFIGS.index)
        self._rows = {row["id"]: row for row in self.state["questions"]}
        self.answer_model: CountedModel | None = None
        self.judge_model: CountedModel | None = None
        self._token_ratios: list[float] = []  # the server's prompt tokens / our rough estimate, per call
        self._previous_llm = dict(self.state.get("llm") or {})
        self._previous_seconds = float(self.state.get("seconds") or 0.0)
        self._started = time.perf_counter()
        self._stores: QAStores | None = None

    def _load_sample(self) -> list[tuple[Conversation, Question]]:
        path = self.options.data
        if not path.is_file():
            raise QAInputError(f"{path}: no such file")
        try:
            conversations = load_conversations(path, require_evidence=False)
        except OSError as exc:
            raise QAInputError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else (str(exc).splitlines() or [""])[0][:120]
            raise QAInputError(f"{path} is not a LoCoMo-format file ({detail})") from None
        empty = [c.id for c in conversations if not c.sessions or not any(s.turns for s in c.sessions)]
        if empty:
            raise QAInputError(f"{path} is not a LoCoMo-format file (conversation {empty[0]} has no session turns)")
        pool = [(c, q) for c in conversations for q in c.questions
                if q.category in self.options.categories and q.answer.strip()]
        if not pool:
            raise QAInputError(f"{path} has no question with an answer in categories "
                               f"{','.join(map(str, self.options.categories))}")
        if self.options.limit is not None and self.options.limit < 1:
            raise QAInputError("--limit must be at least 1")
        if self.options.top_k is not None:
            try:
                check_int(self.options.top_k, "--top-k", 1, 1000)
            except ValidationError as exc:
                raise QAInputError(str(exc)) from None
        return stratified_sample(pool, self.options.limit, self.options.seed)

    # -- models ---------------------------------------------------------------------------------
    def connect(self) -> None:
        """Build the models and make one cheap call to each, so an unreachable one fails now."""
        answer_settings = self.settings.llm
        if "full" in self.options.configs and answer_settings.timeout_s is None and answer_settings.is_local():
            # a CPU server reads a whole LoCoMo conversation (25k tokens) for many minutes
            answer_settings = answer_settings.model_copy(update={"timeout_s": FULL_LOCAL_TIMEOUT_S})
        try:
            answer = build_llm(answer_settings)
            same = _model_identity(self.judge_settings) == _model_identity(self.settings.llm)
            judge = answer if same else build_llm(self.judge_settings)
        except MemoryScopeError as exc:
            raise QAInputError(f"cannot build the model: {exc}") from None
        assert answer is not None and judge is not None
        self.answer_model = CountedModel(answer)
        self.judge_model = self.answer_model if judge is answer else CountedModel(judge)
        for name, model in (("answering", self.answer_model), ("judge", self.judge_model)):
            if name == "judge" and model is self.answer_model:
                continue
            try:
                model.chat(PROBE_MESSAGES, max_tokens=2)
            except MemoryScopeError as exc:
                raise QAInputError(f"the {name} model is unreachable: {' '.join(str(exc).split())}") from None

    # -- bookkeeping ----------------------------------------------------------------------------
    def _plan_redo(self) -> dict[str, str]:
        """The configurations of this run whose answers in the file are made again, each with why:
        asked for (--redo) or made with other settings than the current `config_settings`."""
        recorded = self.state.setdefault("settings_by_config", {})
        plan: dict[str, str] = {}
        for name in self.options.configs:
            answered = any(name in row["answers"] for row in self.state["questions"])
            if not answered:
                continue
            if name in self.options.redo:
                plan[name] = "--redo"
                continue
            changed = changed_settings(recorded.get(name) or {}, config_settings(name, self.options, self.settings))
            if changed:
                plan[name] = f"{' and '.join(changed)} changed"
        return plan

    def _apply_redo(self) -> None:
        """Drop the answers (and their verdicts) of the configurations to answer again, and record
        the current settings of every configuration this run answers; said on stderr."""
        for name, why in self._redo.items():
            dropped = 0
            for row in self.state["questions"]:
                if row["answers"].pop(name, None) is not None:
                    dropped += 1
            print(f"{name}: {why}, {dropped} answers made again", file=_stderr())
        self._redo = {}
        for name in self.options.configs:
            self.state["settings_by_config"][name] = config_settings(name, self.options, self.settings)
        self.state["settings_by_config"] = {name: self.state["settings_by_config"][name]
                                            for name in CONFIGS if name in self.state["settings_by_config"]}

    def _save(self) -> None:
        if self.options.out is not None:
            write_atomically(self.options.out, self.state)

    def _missing_answers(self) -> list[tuple[Conversation, Question, str]]:
        todo = []
        for conv, question in self.items:
            row = self._rows[question_id(conv, question)]
            for name in ANSWER_ORDER:
                if name in self.options.configs and name not in row["answers"]:
                    todo.append((conv, question, name))
        return todo

    def _unjudged(self) -> list[tuple[dict[str, Any], str]]:
        return [(row, name) for row in self.state["questions"] for name in CONFIGS
                if name in self.options.configs and name in row["answers"]
                and row["answers"][name].get("text") is not None and row["answers"][name].get("j") is None]

    def _reopen_verdicts(self) -> None:
        """For --rejudge: the rules decide every answer again; an answer they still leave to the
        LLM keeps its readable LLM verdict, the others (and unreadable ones) are judged again."""
        for row in self.state["questions"]:
            for name, answer in row["answers"].items():
                if name not in self.options.configs or answer.get("text") is None:
                    continue
                verdict = deterministic_verdict(answer["text"], row["gold"], row["question"])
                if verdict is not None:
                    answer.update(j=int(verdict.correct), judged_by=verdict.rule)
                    answer.pop("judge_reply", None)
                    answer.pop("judge_unparsed", None)
                elif answer.get("judged_by") != "llm" or answer.get("judge_unparsed"):
                    for key in ("j", "judged_by", "judge_reply", "judge_unparsed"):
                        answer.pop(key, None)
                    answer["j"] = None
        self._save()

    # -- answering ------------------------------------------------------------------------------
    def context(self, stores: QAStores, conv: Conversation, question: Question, name: str) -> tuple[str, float]:
        """The memory block configuration `name` gives `question` (from `stores`, see `open_stores`)
        and the retrieval time in ms, in the question's language."""
        language = self._rows[question_id(conv, question)]["language"]
        now = question_time(conv)
        start = time.perf_counter()
        if name == "none":
            return "", 0.0
        top_k = self.options.top_k or self.settings.retrieval.top_k
        if name == "full":
            return render_block(_full_context(conv, language)), 0.0
        if name == "vector":
            stores.ensure(conv, "turns")
            lines, vectors = stores.vector_lines(conv, language)
            start = time.perf_counter()  # the search alone, as for `turns`
            query = stores.turns.embedder.embed([question.text], kind="query")[0]
            scores = vectors @ np.asarray(query, dtype=np.float32) if len(lines) else np.zeros(0)
            order = np.argsort(-scores, kind="stable")[:top_k]
            chosen = [lines[i] for i in order]
            return render_block("\n".join(chosen)) if chosen else "", (time.perf_counter() - start) * 1000
        stores.ensure(conv, name)
        engine = {"turns": stores.turns, "observations": stores.observations}.get(name) or stores.consolidated
        assert engine is not None
        start = time.perf_counter()
        result = engine.retrieve(conv.id, question.text, top_k=self.options.top_k, now=now)
        return result_block(result), (time.perf_counter() - start) * 1000

    def _estimate(self, messages: list[dict[str, str]]) -> float:
        rough = sum(estimate_tokens(m["content"]) for m in messages)
        factor = statistics.median(self._token_ratios) if self._token_ratios else 1.0
        return rough * factor

    def _answer(self, stores: QAStores, conv: Conversation, question: Question, name: str) -> dict[str, Any]:
        block, retrieve_ms = self.context(stores, conv, question, name)
        return self.answer_with_block(conv, question, name, block, retrieve_ms)

    def answer_with_block(self, conv: Conversation, question: Question, name: str, block: str,
                          retrieve_ms: float = 0.0) -> dict[str, Any]:
        """Configuration `name`'s answer to `question` given its memory `block` (what `context` built,
        here or in another version of the code), unjudged: the answer row `bench qa` stores. Needs
        `connect` first."""
        assert self.answer_model is not None
        language = self._rows[question_id(conv, question)]["language"]
        now_text = format_memory_time(question_time(conv), language)
        messages = answer_messages(block, question.text, now_text, language)
        if name == "full":
            estimate = self._estimate(messages)
            if estimate > self.options.max_context_tokens:
                return {"text": None, "j": None, "f1": None,
                        "skipped": f"about {estimate:,.0f} prompt tokens > --max-context-tokens "
                                   f"{self.options.max_context_tokens:,}"}
        start = time.perf_counter()
        try:
            result = self.answer_model.chat(messages, max_tokens=self.settings.llm.max_tokens or ANSWER_MAX_TOKENS)
        except ModelError as exc:
            # a whole conversation the server cannot hold (llama.cpp: "exceeds the available context
            # size") is a skip with its reason, not the end of a long run
            if name == "full" and _CONTEXT_REFUSED.search(str(exc)):
                return {"text": None, "j": None, "f1": None,
                        "skipped": f"the server refused the prompt: {' '.join(str(exc).split())[:200]}"}
            raise
        seconds = time.perf_counter() - start
        prompt_tokens = result.usage.prompt_tokens
        rough = sum(estimate_tokens(m["content"]) for m in messages)
        if prompt_tokens and rough:
            self._token_ratios.append(prompt_tokens / rough)
        whole = sum(len(m["content"]) for m in messages)
        context_tokens = round(prompt_tokens * len(block) / whole) if prompt_tokens and whole else \
            round(estimate_tokens(block))
        text = result.text.strip()
        return {"text": text, "j": None, "f1": round(token_f1(text, question.answer, question.category), 4),
                "contains": contains(text, question.answer), "prompt_tokens": prompt_tokens,
                "completion_tokens": result.usage.completion_tokens, "context_tokens": context_tokens,
                "answer_s": round(seconds, 3), "retrieve_ms": round(retrieve_ms, 2),
                "truncated": result.truncated}

    # -- judging --------------------------------------------------------------------------------
    def judge_answer(self, conv: Conversation, question: Question, answer: dict[str, Any],
                     cache: dict[tuple[str, str], dict[str, Any]]) -> None:
        """Judge `answer` (from `answer_with_block`) in place, as `bench qa` does: its rules first,
        then the judge model; `cache` holds the verdicts of answers already judged (start with {})."""
        self._judge(self._rows[question_id(conv, question)], answer, cache)

    def _judge(self, row: dict[str, Any], answer: dict[str, Any], cache: dict[tuple[str, str], dict[str, Any]]) -> None:
        assert self.judge_model is not None
        verdict = deterministic_verdict(answer["text"], row["gold"], row["question"])
        if verdict is not None:
            answer.update(j=int(verdict.correct), judged_by=verdict.rule)
            return
        key = (row["id"], " ".join(answer["text"].split()).lower())
        if key in cache:
            answer.update(cache[key])
            return
        now_text = format_memory_time(datetime.fromisoformat(row["now"]), row["language"])
        messages = judge_messages(row["question"], row["gold"], answer["text"], now_text)
        replies = []
        correct = None
        nudge = "正确 还是 错误？只回复一个词。" if "标准答案" in messages[0]["content"] \
            else "CORRECT or WRONG? Reply with one word."
        for _attempt in range(2):  # an unreadable verdict is asked for once more
            reply = self.judge_model.chat(messages, max_tokens=JUDGE_MAX_TOKENS).text
            replies.append(reply[:200])
            correct = parse_verdict(reply)
            if correct is not None:
                break
            messages = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": nudge}]
        fields: dict[str, Any] = {"j": int(bool(correct)), "judged_by": "llm", "judge_reply": replies[-1]}
        if correct is None:
            fields["judge_unparsed"] = True
        cache[key] = fields
        answer.update(fields)

    # -- the whole run ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Answer what is missing, judge what is unjudged, summarise; returns the report."""
        from tqdm import tqdm
        self._started = time.perf_counter()
        self._apply_redo()
        todo = self._missing_answers()
        try:
            with tqdm(total=len(todo), desc="answering", unit="q", disable=not self.progress,
                      file=_stderr()) as bar:
                if todo:
                    self._answer_all(todo, bar)
            if self.options.rejudge:
                self._reopen_verdicts()
            unjudged = self._unjudged()
            cache: dict[tuple[str, str], dict[str, Any]] = {}
            with tqdm(total=len(unjudged), desc="judging", unit="q", disable=not self.progress,
                      file=_stderr()) as bar:
                for row, name in unjudged:
                    self._judge(row, row["answers"][name], cache)
                    self._account()
                    self._save()
                    bar.update(1)
        finally:
            self._account()
            self.state["configs"] = summarise(self.state["questions"], self.state["configs_requested"])
            self.state["complete"] = not self._missing_answers() and not self._unjudged()
            self._save()
        return self.state

    @contextmanager
    def open_stores(self, consolidated: bool = False) -> Iterator[QAStores]:
        """Fresh stores in a temporary folder: turns and observations (no LLM, no consolidation),
        and with `consolidated` one whose consolidation the caller runs with the configured llm."""
        with tempfile.TemporaryDirectory(prefix="memoryscope-bench-qa-") as tmp, ExitStack() as stack:
            base = self.settings.model_copy(update={
                "consolidation": self.settings.consolidation.model_copy(update={"enabled": False}),
                "llm": LLMSettings()})

            def at(settings: Settings, name: str) -> Settings:
                return settings.model_copy(update={"store": settings.store.model_copy(
                    update={"backend": "sqlite", "path": Path(tmp) / name})})

            turn_store = stack.enter_context(MemoryScope(at(base, "turns.db")))
            obs_store = stack.enter_context(MemoryScope(at(base, "observations.db"), embedder=turn_store.embedder))
            stores = QAStores(turn_store, obs_store)
            if consolidated:
                driven = self.settings.model_copy(update={"consolidation": self.settings.consolidation.model_copy(
                    update={"enabled": True, "worker": "none", "flush_on_close": False})})
                stores.consolidated = stack.enter_context(
                    MemoryScope(at(driven, "consolidated.db"), embedder=turn_store.embedder))
            yield stores

    def _answer_all(self, todo: list[tuple[Conversation, Question, str]], bar: Any) -> None:
        with self.open_stores(consolidated=any(name == "consolidated" for _c, _q, name in todo)) as stores:
            self._stores = stores
            for conv, question, name in _call_order(todo):
                row = self._rows[question_id(conv, question)]
                row["answers"][name] = self._answer(stores, conv, question, name)
                if stores.consolidation:
                    self.state.setdefault("consolidation", {}).update(stores.consolidation)
                self._account()
                self._save()
                bar.update(1)

    def estimate(self) -> dict[str, Any]:
        """What the run would cost, without calling a model: per configuration the answer calls
        and their estimated prompt tokens (the memory blocks are really built), and the judge calls
        at most (one per answer; deterministic rules and repeated answers save some)."""
        per_config: dict[str, dict[str, Any]] = {}
        todo = [(c, q, n) for c, q in self.items for n in ANSWER_ORDER
                if n in self.options.configs and n != "consolidated"]  # its cost depends on the model
        with self.open_stores() as stores:
            for conv, question, name in _call_order(todo):
                language = self._rows[question_id(conv, question)]["language"]
                block, _ms = self.context(stores, conv, question, name)
                messages = answer_messages(block, question.text, "2023-05-08 Mon", language)
                tokens = sum(estimate_tokens(m["content"]) for m in messages)
                entry = per_config.setdefault(name, {"calls": 0, "prompt_tokens": 0.0, "skipped": 0})
                if name == "full" and tokens > self.options.max_context_tokens:
                    entry["skipped"] += 1
                    continue
                entry["calls"] += 1
                entry["prompt_tokens"] += tokens
        answers = sum(e["calls"] for e in per_config.values())
        judge_tokens = estimate_tokens(judge_messages("q" * 60, "g" * 30, "a" * 60, "2023-05-08")[0]["content"])
        for entry in per_config.values():
            entry["prompt_tokens"] = round(entry["prompt_tokens"])
            entry["prompt_tokens_mean"] = round(entry["prompt_tokens"] / max(1, entry["calls"]))
        return {"questions": len(self.items), "configs": per_config, "answer_calls": answers,
                "judge_calls_at_most": answers, "judge_prompt_tokens_at_most": round(answers * judge_tokens),
                "prompt_tokens_total": round(sum(e["prompt_tokens"] for e in per_config.values())
                                             + answers * judge_tokens),
                "note": "tokens estimated: a CJK character one token, other text four characters one token"}

    def _account(self) -> None:
        """The LLM figures and seconds of every run on this file so far."""
        counts = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for model in {id(m): m for m in (self.answer_model, self.judge_model) if m is not None}.values():
            for key in counts:
                counts[key] += model.counts[key]
        if self._stores is not None:
            for stats in self._stores.consolidation.values():
                counts["calls"] += stats["llm_calls"]
                counts["prompt_tokens"] += stats["prompt_tokens"]
                counts["completion_tokens"] += stats["completion_tokens"]
        total = {key: int(self._previous_llm.get(key, 0)) + counts[key] for key in counts}
        self.state["llm"] = {**total, "tokens": total["prompt_tokens"] + total["completion_tokens"],
                             "model": self.settings.llm.model, "judge_model": self.judge_settings.model}
        self.state["seconds"] = round(self._previous_seconds + time.perf_counter() - self._started, 1)


def _stderr() -> Any:
    import sys
    return sys.stderr


def _call_order(todo: list[tuple[Conversation, Question, str]]) -> list[tuple[Conversation, Question, str]]:
    """Per conversation (in file order), each configuration's questions together, `full` last."""
    conv_rank: dict[str, int] = {}
    for conv, _q, _n in todo:
        conv_rank.setdefault(conv.id, len(conv_rank))
    return sorted(todo, key=lambda item: (conv_rank[item[0].id], ANSWER_ORDER.index(item[2])))


# ---------------------------------------------------------------------------------------------
# The report


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def summarise(questions: list[dict[str, Any]], configs: Sequence[str]) -> dict[str, Any]:
    """Per configuration: J, F1, containment (overall, per category, per language when the file
    mixes languages), token and time figures, and the skipped questions."""
    out: dict[str, Any] = {}
    languages = sorted({row["language"] for row in questions})
    for name in configs:
        rows = [(row, row["answers"][name]) for row in questions if name in row["answers"]]
        judged = [(row, a) for row, a in rows if a.get("j") is not None]
        skipped = [a["skipped"] for _row, a in rows if a.get("skipped")]

        def figures(chosen: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
            return {"n": len(chosen), "j": _mean([a["j"] for _r, a in chosen]),
                    "f1": _mean([a["f1"] for _r, a in chosen])}

        entry: dict[str, Any] = {
            **figures(judged),
            "contains": _mean([float(a["contains"]) for _r, a in judged]),
            "by_category": {str(c): figures([(r, a) for r, a in judged if r["category"] == c])
                            for c in sorted({r["category"] for r, _a in judged})},
            "prompt_tokens_mean": _mean([a["prompt_tokens"] for _r, a in rows if a.get("text") is not None]),
            "context_tokens_mean": _mean([a["context_tokens"] for _r, a in rows if a.get("text") is not None]),
            "answer_s_p50": _round(percentile([a["answer_s"] for _r, a in rows if a.get("text") is not None], 50)),
            "retrieve_ms_p50": _round(percentile([a["retrieve_ms"] for _r, a in rows
                                                   if a.get("text") is not None], 50)),
            "skipped": len(skipped),
            "judged_by": _count(a.get("judged_by", "") for _r, a in judged),
            "judge_unparsed": sum(1 for _r, a in judged if a.get("judge_unparsed")),
            "pending": len([1 for _r, a in rows if a.get("text") is not None and a.get("j") is None]),
        }
        if skipped:
            entry["skipped_reasons"] = sorted(set(skipped))[:5]
        if len(languages) > 1:
            entry["by_language"] = {lang: figures([(r, a) for r, a in judged if r["language"] == lang])
                                    for lang in languages}
        out[name] = entry
    return out


def _round(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 3)


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def format_table(report: dict[str, Any]) -> str:
    """The report as a Markdown table: one row per configuration."""
    categories = sorted({row["category"] for row in report["questions"]})
    head = ["config", "n", "J", "F1", "contains", *[f"J c{c}" for c in categories], "prompt tok", "context tok",
            "answer s p50", "skipped"]
    title = (f"bench qa: {len(report['questions'])} questions, model {report['llm'].get('model')}, "
             f"judge {report['llm'].get('judge_model')}")
    lines = [title, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(value: Any, digits: int = 3) -> str:
        return "" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    for name, entry in report["configs"].items():
        cats = [cell((entry["by_category"].get(str(c)) or {}).get("j")) for c in categories]
        lines.append("| " + " | ".join([name, str(entry["n"]), cell(entry["j"]), cell(entry["f1"]),
                                        cell(entry["contains"]), *cats, cell(entry["prompt_tokens_mean"], 0),
                                        cell(entry["context_tokens_mean"], 0), cell(entry["answer_s_p50"], 1),
                                        str(entry["skipped"])]) + " |")
    llm = report["llm"]
    tail = "" if report.get("complete") else " (incomplete: rerun the same command to continue)"
    lines += ["", f"LLM: {llm['calls']} calls, {llm['tokens']:,} tokens; {report['seconds']:.0f} s{tail}"]
    return "\n".join(lines)


def format_estimate(estimate: dict[str, Any]) -> str:
    """The cost estimate as a Markdown table."""
    lines = [f"bench qa estimate: {estimate['questions']} questions", "",
             "| config | answer calls | prompt tokens | mean per call | skipped |", "|---|---|---|---|---|"]
    for name, entry in estimate["configs"].items():
        lines.append(f"| {name} | {entry['calls']} | {entry['prompt_tokens']:,} | {entry['prompt_tokens_mean']:,} | "
                     f"{entry['skipped']} |")
    judge = (f"judge: at most {estimate['judge_calls_at_most']} calls, about "
             f"{estimate['judge_prompt_tokens_at_most']:,} prompt tokens; in all about "
             f"{estimate['prompt_tokens_total']:,} prompt tokens ({estimate['note']})")
    lines += ["", judge]
    return "\n".join(lines)


def run_qa(options: QAOptions, settings: Settings, judge_settings: LLMSettings | None = None, *,
           progress: bool = True, on_ready: Callable[[QARun], None] | None = None) -> dict[str, Any]:
    """Check the input, reach the models, then answer, judge and summarise (see module docstring)."""
    run = QARun(options, settings, judge_settings, progress=progress)
    run.connect()
    if on_ready:
        on_ready(run)
    return run.run()

