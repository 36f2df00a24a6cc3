"""What consolidation costs: LLM calls and tokens per consolidated message, and `record` latency
while the background worker consolidates.

    python bench/consolidation_cost.py                       # fake model, realistic scripted answers
    python bench/consolidation_cost.py --data ../shared/data/locomo_dev.json --limit 200
    OPENAI_API_KEY=... [OPENAI_BASE_URL=...] [BENCH_LLM_MODEL=gpt-4o-mini] python bench/consolidation_cost.py --real

Against the fake (offline) the model's answers are scripted from the data: with LoCoMo data, the
observations LoCoMo's authors wrote for each turn (realistic content and length); otherwise one
third-person observation per user message. Token counts are then approximate (the local WordPiece
tokenizer, which counts close to GPT tokenizers for English). Against a real endpoint the counts
are the provider's.

Measured, for the same conversation:
1. batch: everything recorded first, then consolidated on demand (up to 20 messages per call);
2. background: messages recorded one by one (as an app does) while the worker thread consolidates
   (``every_messages=2``), with a simulated model latency; `record` latency p50/p95 is compared
   with the same recording and no worker at all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.consolidation.extract import opening
from memoryscope_plugins.consolidation.report import ConsolidationReport

ROOT = Path(__file__).resolve().parents[1]

NEW_LINE = re.compile(r"^#(\d+) \[[^\]]*\] ([^:]+): (.*)$")
OBS_LINE = re.compile(r"^(O\d+) \[[^\]]*\] (.*)$")


# -- data ------------------------------------------------------------------------------------------

def load_conversation(path: Path | None, limit: int) -> tuple[list[dict], dict[str, list[str]]]:
    """Messages (dicts for `record`) and, for LoCoMo data, the reference observations per turn text."""
    if path is not None:
        data = json.loads(path.read_text(encoding="utf-8"))[0]
        conv = data["conversation"]
        first = conv["speaker_a"]
        by_dia: dict[str, list[str]] = {}
        for session in data.get("observation", {}).values():
            for items in session.values():
                for text, evidence in items:
                    for dia in re.split(r"[;,\s]+", str(evidence)):
                        if dia:
                            by_dia.setdefault(dia, []).append(text)
        messages, observations = [], {}
        number = 1
        while f"session_{number}" in conv:
            start = _locomo_time(conv[f"session_{number}_date_time"])
            for i, turn in enumerate(conv[f"session_{number}"]):
                text = turn["text"] + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else "")
                role = "user" if turn["speaker"] == first else "assistant"
                messages.append({"role": role, "name": turn["speaker"], "content": text,
                                 "timestamp": start + timedelta(seconds=30 * i)})
                observations[text] = by_dia.get(turn["dia_id"], [])
            number += 1
        return messages[:limit], observations
    demo = json.loads((ROOT / "memoryscope_plugins" / "data" / "demo_conversation.json").read_text(encoding="utf-8"))
    messages = []
    for session in demo["sessions"]:
        start = datetime.fromisoformat(session["time"])
        for i, (role, text) in enumerate(session["messages"]):
            messages.append({"role": role, "name": "Anna" if role == "user" else None, "content": text,
                             "timestamp": start + timedelta(seconds=30 * i)})
    messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
    return messages[:limit], {}


def _locomo_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


# -- the scripted model ------------------------------------------------------------------------------

class ScriptedModel:
    """Answers consolidation and reflection prompts the way a good model would, from the data."""

    def __init__(self, observations: dict[str, list[str]], latency: float) -> None:
        self.observations = observations
        self.latency = latency
        from tokenizers import Tokenizer
        self.tokenizer = Tokenizer.from_file(str(ROOT / "memoryscope_plugins" / "models" / "assets"
                                                 / "minilm_tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def answer(self, messages: list[dict]) -> str:
        system = messages[0]["content"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        if '"says"' in system:  # extraction: one entry per numbered (user) message
            entries = []
            for line in user.splitlines():
                match = NEW_LINE.match(line)
                if not match:
                    continue
                number, speaker, text = int(match.group(1)), match.group(2), match.group(3)
                texts = self.observations.get(text)
                if texts is None:  # no reference data: one observation per longer message
                    texts = [] if len(text) < 25 else [f"{speaker} said that {text}"]
                entries.append({"n": number, "says": opening(text, "en"), "observations": [
                    {"content": t, "about": speaker, "kind": "fact", "reality": "real", "time": None, "date": None,
                     "importance": 2} for t in texts]})
            return json.dumps({"messages": entries}, ensure_ascii=False)
        if '"answers"' in system:  # repeat / contradiction questions: keep both
            count = len(re.findall(r"^\d+\. ", user, re.MULTILINE))
            return json.dumps({"answers": [{"n": n, "verdict": "both"} for n in range(1, count + 1)]})
        if '"insights"' in system:
            section = user.split("Related older observations:")[0]
            labels = [m.group(1) for m in map(OBS_LINE.match, section.splitlines()) if m]
            lines = {m.group(1): m.group(2) for m in map(OBS_LINE.match, section.splitlines()) if m}
            insights = [{"subject": f"Life and interests ({i + 1})", "value": " ".join(lines[label] for label in chunk),
                         "sources": chunk, "update": None, "merge": []}
                        for i, chunk in enumerate([labels[j:j + 3] for j in range(0, len(labels), 3)][:2])]
            return json.dumps({"insights": insights}, ensure_ascii=False)
        return "Noted."

    def completion(self, body: dict) -> dict:
        """The OpenAI chat.completion body answering one request body, with token counts."""
        messages = body.get("messages") or []
        text = self.answer(messages)
        if self.latency:
            time.sleep(self.latency)
        prompt_tokens = sum(self.tokens(m.get("content", "")) + 4 for m in messages)
        completion_tokens = self.tokens(text)
        return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
                "model": body.get("model") or "fake",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}


class ScriptedEndpoint:
    """`ScriptedModel` behind an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 (a free
    port), so the real `openai` client and its HTTP round trip are part of what is measured."""

    def __init__(self, model: ScriptedModel) -> None:
        scripted = model

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no request log
                return None

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                payload = json.dumps(scripted.completion(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        host, port = self.server.server_address[:2]
        self.url = f"http://{host!s}:{port}"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


# -- measurements ---------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def make_engine(folder: Path, llm: Any, embedder: Any, worker: bool, **consolidation: Any) -> MemoryScope:
    settings = Settings(store={"path": folder / "memory.db"},
                        consolidation={"worker": "thread" if worker else "none", **consolidation})
    return MemoryScope(settings, embedder=embedder, llm=llm, start_worker=worker)


def run_batch(messages: list[dict], llm: Any, embedder: Any) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        engine = make_engine(Path(folder), llm, embedder, worker=False)
        try:
            for message in messages:
                engine.record("bench-user", [message])
            started = time.perf_counter()
            report = engine.consolidate("bench-user")
            seconds = time.perf_counter() - started
            usage = {operation: {"total_tokens": engine.usage("bench-user", operation).total_tokens}
                     for operation in ("consolidate", "reflect")}
            return {"report": report, "seconds": seconds, "usage": usage,
                    "observations": engine.count("bench-user") - len(messages)}
        finally:
            engine.close()


def count_reports(stats: dict[str, int], lock: threading.Lock) -> Any:
    """A consolidation listener adding each report's messages, LLM calls and tokens to `stats`."""
    def listener(user_id: str, report: ConsolidationReport) -> None:
        with lock:
            for name, value in (("messages", report.messages), ("llm_calls", report.llm_calls),
                                ("prompt_tokens", report.prompt_tokens),
                                ("completion_tokens", report.completion_tokens)):
                stats[name] = stats.get(name, 0) + value
    return listener


def talk(engine: MemoryScope, user: str, messages: list[dict], times: list[float], lock: threading.Lock) -> None:
    """One user recording `messages` one by one, each `record`'s latency (ms) appended to `times`."""
    for message in messages:
        started = time.perf_counter()
        engine.record(user, [message])
        elapsed = (time.perf_counter() - started) * 1000
        with lock:
            times.append(elapsed)
        time.sleep(0.005)  # a conversation, not a bulk import


def run_background(messages: list[dict], llm: Any, embedder: Any, users: int) -> dict:
    """Several users talk at once (one thread each), recording message by message."""
    latencies: dict[str, dict[str, Any]] = {}
    for mode in ("no worker", "worker"):
        with tempfile.TemporaryDirectory() as folder:
            engine = make_engine(Path(folder), llm if mode == "worker" else None, embedder,
                                 worker=mode == "worker", every_messages=2, every_seconds=1.0)
            stats: dict[str, int] = {}
            engine.add_consolidation_listener(count_reports(stats, threading.Lock()))
            times: list[float] = []
            lock = threading.Lock()
            started = time.perf_counter()
            threads = [threading.Thread(target=talk, args=(engine, f"user{u}", messages, times, lock))
                       for u in range(users)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            record_seconds = time.perf_counter() - started
            result: dict[str, Any] = {"record_ms": times, "record_seconds": record_seconds}
            if mode == "worker":
                drain_started = time.perf_counter()
                engine.flush(timeout=600)
                result["drain_seconds"] = time.perf_counter() - drain_started
                result["stats"] = dict(stats)
            engine.close()
            latencies[mode] = result
    return latencies


def real_llm() -> Any:
    settings = Settings()
    if settings.llm.provider != "none":
        from memoryscope_plugins.models.factory import build_llm
        return build_llm(settings.llm)
    if os.environ.get("OPENAI_API_KEY"):
        from memoryscope_plugins.models.openai_compat import OpenAIChatModel
        return OpenAIChatModel(os.environ.get("BENCH_LLM_MODEL", "gpt-4o-mini"),
                               base_url=os.environ.get("OPENAI_BASE_URL"))
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="a LoCoMo-format file (first conversation used)")
    parser.add_argument("--limit", type=int, default=120, help="messages of the conversation to use")
    parser.add_argument("--users", type=int, default=4, help="users talking at once in the background run")
    parser.add_argument("--latency", type=float, default=0.5, help="simulated model latency (fake model), s")
    parser.add_argument("--real", action="store_true", help="use the endpoint from the environment")
    args = parser.parse_args(argv)
    default_data = ROOT.parent / "shared" / "data" / "locomo_dev.json"
    data = args.data if args.data is not None else (default_data if default_data.is_file() else None)
    if data is not None and not data.is_file():
        print(f"no such data file: {data}", file=sys.stderr)
        return 2
    messages, reference = load_conversation(data, args.limit)

    from memoryscope_plugins.models.local_onnx import LocalOnnxEmbedder
    embedder = LocalOnnxEmbedder()
    embedder.embed(["warm up"])
    server = None
    if args.real:
        llm = real_llm()
        if llm is None:
            print("--real needs OPENAI_API_KEY (and optionally OPENAI_BASE_URL, BENCH_LLM_MODEL) or "
                  "MEMORYSCOPE_LLM__* settings", file=sys.stderr)
            return 2
        source = f"real endpoint ({llm.name}); provider token counts"
    else:
        from memoryscope_plugins.models.openai_compat import OpenAIChatModel
        scripted = ScriptedModel(reference, latency=0.0)
        server = ScriptedEndpoint(scripted)
        llm = OpenAIChatModel("scripted", base_url=server.url + "/v1", api_key="sk-bench-offline")
        source = "fake model with scripted answers; approximate (WordPiece) token counts"
    try:
        user_messages = sum(1 for m in messages if m["role"] == "user")
        print(f"data: {data.name if data else 'packaged demo conversation'}, {len(messages)} messages "
              f"({user_messages} from the user); model: {source}")
        batch = run_batch(messages, llm, embedder)
        report, usage = batch["report"], batch["usage"]
        calls, prompt, completion = report.llm_calls, report.prompt_tokens, report.completion_tokens
        n = len(messages)
        print("\n1. batch consolidation (record all, then consolidate; up to 20 messages per call)")
        print(f"   LLM calls: {calls} ({calls / n:.3f} per message; "
              f"{usage.get('consolidate', {}).get('total_tokens', 0)} tokens extraction, "
              f"{usage.get('reflect', {}).get('total_tokens', 0)} reflection)")
        print(f"   tokens per consolidated message: {prompt / n:.0f} prompt + {completion / n:.0f} completion")
        print(f"   observations: {len(report.added)}, merged: {len(report.merged)}, expired: {len(report.expired)}, "
              f"insights: {len(report.insights)}; wall time {batch['seconds']:.1f} s")

        if server is not None:
            scripted.latency = args.latency
        runs = run_background(messages, llm, embedder, args.users)
        base, worker = runs["no worker"], runs["worker"]
        stats = worker["stats"]
        total = stats.get("messages", 0) or 1
        print(f"\n2. background worker (every_messages=2), {args.users} users recording at once"
              + (f", simulated model latency {args.latency:g} s" if server is not None else ""))
        print(f"   record latency, no worker:   p50 {percentile(base['record_ms'], .5):.1f} ms, "
              f"p95 {percentile(base['record_ms'], .95):.1f} ms ({len(base['record_ms'])} records)")
        print(f"   record latency, with worker: p50 {percentile(worker['record_ms'], .5):.1f} ms, "
              f"p95 {percentile(worker['record_ms'], .95):.1f} ms")
        print(f"   LLM calls: {stats.get('llm_calls', 0)} for {stats.get('messages', 0)} messages "
              f"({stats.get('llm_calls', 0) / total:.3f} per message); tokens per message: "
              f"{stats.get('prompt_tokens', 0) / total:.0f} prompt + {stats.get('completion_tokens', 0) / total:.0f} "
              f"completion; drained {worker['drain_seconds']:.1f} s after the last record")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
