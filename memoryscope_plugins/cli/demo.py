"""`memoryscope-plugins demo`: the offline first run. Records a short multi-session conversation
that ships with the package, then shows what memory recalls for a few questions, with timings."""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TextIO

from ..engine import MemoryScope
from ..settings import Settings
from ..types import Message


def load_demo() -> dict:
    return json.loads((resources.files("memoryscope_plugins") / "data" / "demo_conversation.json")
                      .read_text(encoding="utf-8"))


def run_demo(out: TextIO, *, settings: Settings | None = None, store_path: Path | None = None,
             top_k: int = 3) -> dict:
    """Run the demo, printing to `out`; returns what was recalled per question (for tests)."""
    demo = load_demo()
    user, agent = demo["user"], demo["agent"]
    with tempfile.TemporaryDirectory(prefix="memoryscope-demo-") as tmp:
        path = store_path or Path(tmp) / "demo.db"
        settings = settings or Settings()
        settings = settings.model_copy(update={
            "store": settings.store.model_copy(update={"backend": "sqlite", "path": path})})
        start = time.perf_counter()
        with MemoryScope(settings) as memory:
            out.write(f"memoryscope-plugins demo: embedded store at {path}, embedder {memory.embedder.name}, "
                      f"LLM: {memory.llm.name if memory.llm else 'none (turns are stored as they are)'}\n")
            out.write(f"  engine ready in {(time.perf_counter() - start) * 1000:.0f} ms\n\n")
            for number, session in enumerate(demo["sessions"], start=1):
                when = datetime.fromisoformat(session["time"])
                messages = [Message(role=role, content=text, name=user.capitalize() if role == "user" else None,
                                    timestamp=when + timedelta(seconds=i))
                            for i, (role, text) in enumerate(session["messages"])]
                t = time.perf_counter()
                memory.record(user, messages, agent_id=agent, session_id=f"session-{number}")
                out.write(f"session {number} ({when:%Y-%m-%d}): recorded {len(messages)} messages in "
                          f"{(time.perf_counter() - t) * 1000:.1f} ms\n")
            out.write("\n")
            recalled = {}
            for item in demo["questions"]:
                result = memory.retrieve(user, item["query"], now=item["now"], top_k=top_k)
                rng = result.time_range
                span = (f" (time range {rng.start:%Y-%m-%d} .. {rng.end:%Y-%m-%d})"
                        if rng and rng.start and rng.end else "")
                out.write(f"Q: {item['query']}  [now {item['now'][:10]}]{span}\n")
                out.write(f"   retrieved in {result.timings_ms['total_ms']:.1f} ms "
                          f"(embedding {result.timings_ms['embed_ms']:.1f} ms, "
                          f"search {result.timings_ms['search_ms']:.1f} ms)\n")
                for line in result.context.splitlines()[1:]:
                    out.write(f"   {line}\n")
                out.write("\n")
                recalled[item["query"]] = [m.memory.content for m in result.memories]
        out.write(f"done in {(time.perf_counter() - start):.1f} s. "
                  "Next: `memoryscope-plugins chat`, or see README.md.\n")
    return recalled
