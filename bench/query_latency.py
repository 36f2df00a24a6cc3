"""Per-query cost of retrieval with the local embedder, float32 and int8 compute, one thread.

    OMP_NUM_THREADS=1 taskset -c 1 python bench/query_latency.py ../shared/data/locomo_dev.json
    OMP_NUM_THREADS=1 taskset -c 1 python bench/query_latency.py ../shared/data/zh_memory_dev.json zh
    python bench/query_latency.py ../shared/data/locomo_dev.json auto context_hop=0   # retrieval settings
    python bench/query_latency.py ../shared/data/locomo_dev.json --conversations 5   # every conversation

Ingests the first two conversations (or `--conversations`), then times `retrieve` and the query embedding alone for each
question, in wall time and in the thread's CPU time. On a shared machine the CPU time is the figure
to read: it leaves out the time spent waiting for a core (not the slowdown of sharing its caches).
The last lines give the ratio of retrieve's wall p50 to the embedding's alone, for every question and
for the questions ranked part by part (`retrieval.query_parts`: each part searched by its own words and
scored with the question's vector, docs/retrieval.md, step 2).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.bench.locomo import ingest, load_conversations


def _summary(seconds: list[float]) -> str:
    return f"p50 {np.percentile(seconds, 50) * 1e3:.2f} ms, p95 {np.percentile(seconds, 95) * 1e3:.2f} ms"


def _ratio(label: str, wall: list[float], embed_wall: list[float]) -> None:
    if wall:
        ratio = float(np.percentile(wall, 50) / np.percentile(embed_wall, 50))
        print(f"  {label} ({len(wall)}): retrieve wall p50 / query embedding wall p50 = {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a LoCoMo-format file")
    parser.add_argument("language", nargs="?", default="auto", help="settings' language (default auto)")
    parser.add_argument("settings", nargs="*", help="retrieval settings as key=value, e.g. context_hop=0")
    parser.add_argument("--conversations", type=int, default=2, help="how many conversations to ingest (default 2)")
    args = parser.parse_args()
    if any("=" not in setting for setting in args.settings) or args.conversations < 1:
        parser.error("settings are key=value, and --conversations at least 1")
    language = args.language
    retrieval = dict(setting.split("=", 1) for setting in args.settings)
    conversations = load_conversations(args.data)[:args.conversations]
    print("load average", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    for int8 in (False, True):
        with tempfile.TemporaryDirectory() as folder:
            settings = Settings.model_validate({
                "language": language, "embedder": {"int8_compute": int8},
                "store": {"path": str(Path(folder) / "m.db")}, "consolidation": {"enabled": False},
                "retrieval": retrieval})
            with MemoryScope(settings) as memory:
                memory.retrieve("warm-up", "warm up the query path")
                cpu, wall, embed, embed_wall, with_parts = [], [], [], [], []
                for conversation in conversations:
                    ingest(memory, conversation, "turns")
                    now = conversation.sessions[-1].when + timedelta(days=1)
                    for question in conversation.questions:
                        started, started_wall = time.thread_time(), time.perf_counter()
                        result = memory.retrieve(conversation.id, question.text, top_k=20, now=now)
                        cpu.append(time.thread_time() - started)
                        wall.append(time.perf_counter() - started_wall)
                        started, started_wall = time.thread_time(), time.perf_counter()
                        memory.embedder.embed([question.text], kind="query")
                        embed.append(time.thread_time() - started)
                        embed_wall.append(time.perf_counter() - started_wall)
                        if any(item.scores.get("part", 0) > 0 for item in result.memories):
                            with_parts.append(len(wall) - 1)
                print(f"{'int8' if int8 else 'float32'} ({memory.embedder.name}), {len(cpu)} questions: "
                      f"retrieve CPU {_summary(cpu)}; query embedding CPU {_summary(embed)}; "
                      f"retrieve wall {_summary(wall)}; query embedding wall {_summary(embed_wall)}")
                _ratio("every question", wall, embed_wall)
                _ratio("questions ranked part by part", [wall[i] for i in with_parts],
                       [embed_wall[i] for i in with_parts])
    print("load average", " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
