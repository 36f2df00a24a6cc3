"""`migrate` on the LoCoMo dev store: SQLite -> PostgreSQL (interrupted after a few batches, then
resumed) -> SQLite, every record compared and the retrieval results of 50 questions compared
(issue 28, the `migrate` target). PostgreSQL is a throwaway embedded server.

    python bench/migrate_locomo.py [--data /work/shared/data/locomo_dev.json] [--stop-after 5]

Prints one JSON object: sizes, copy times and memories/s of each leg, and what differed (nothing,
when it works).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.bench.locomo import ingest, load_conversations
from memoryscope_plugins.bench.throwaway_postgres import postgres_server
from memoryscope_plugins.settings import Settings
from memoryscope_plugins.storage import migrate as mig
from memoryscope_plugins.storage.core import StoreBase


class Stop(Exception):
    pass


def settings_for(path: Path) -> Settings:
    settings = Settings()
    return settings.model_copy(update={
        "store": settings.store.model_copy(update={"backend": "sqlite", "path": path}),
        "consolidation": settings.consolidation.model_copy(update={"enabled": False})})


def build(path: Path, data: str) -> list[tuple[str, str, Any]]:
    """The dev store as the benchmark ingests it (turn mode); returns 50 questions spread over it."""
    conversations = load_conversations(data)
    asked = []
    with MemoryScope(settings_for(path)) as memory:
        for conv in conversations:
            ingest(memory, conv, "turns")
            now = conv.sessions[-1].when + timedelta(days=1)
            asked += [(conv.id, q.text, now) for q in conv.questions]
    step = max(1, len(asked) // 50)
    return asked[::step][:50]


def answers(store: StoreBase | Path, questions: list[tuple[str, str, Any]]) -> list[list[tuple[str, float]]]:
    if isinstance(store, Path):  # an engine on a copy: opening may write (nothing to re-embed, but safe)
        work = store.with_name(store.stem + "-engine.db")
        shutil.copyfile(store, work)
        engine = MemoryScope(settings_for(work))
    else:
        engine = MemoryScope(settings_for(Path("unused.db")), store=store)
    with engine:
        return [[(s.memory.id, round(s.score, 9)) for s in engine.retrieve(user, text, top_k=10, now=now)]
                for user, text, now in questions]


def differences(a: StoreBase, b: StoreBase) -> list[str]:
    """Every memory field by field, every vector exactly, every message log: what differs."""
    found = []
    if sorted(a.users()) != sorted(b.users()):
        found.append("users differ")
    for user in sorted(a.users()):
        for batch in a.iter_memories(user):
            ids = [m.id for m in batch]
            theirs = {m.id: m for m in b.get(user, ids)}
            va, vb = a.vectors_of(user, ids), b.vectors_of(user, ids)
            for memory in batch:
                other = theirs.get(memory.id)
                if other is None or mig.differing_fields(memory, other):
                    found.append(f"memory {memory.id}")
                elif sorted(va) != sorted(vb) or (memory.id in va and not np.array_equal(va[memory.id], vb[memory.id])):
                    found.append(f"vector {memory.id}")
        log_a = [(m.id, m.state, m.message) for batch in a.iter_messages(user) for m in batch]
        log_b = [(m.id, m.state, m.message) for batch in b.iter_messages(user) for m in batch]
        if log_a != log_b:
            found.append(f"messages of {user}")
        if sum(1 for batch in b.iter_memories(user) for _ in batch) != sum(1 for batch in a.iter_memories(user)
                                                                           for _ in batch):
            found.append(f"memory count of {user}")
    return found


def leg(source: str, target: str, *, stop_after: int | None = None, batch_size: int = 500) -> dict[str, Any]:
    """One migration; with `stop_after`, stopped after that many batches and resumed."""
    out: dict[str, Any] = {"from": mig.describe_url(source), "to": mig.describe_url(target)}
    copied, seconds = 0, 0.0
    if stop_after is not None:
        seen = [0]

        def hook(progress: mig.Progress) -> None:
            seen[0] += 1
            if seen[0] == stop_after:
                raise Stop

        began = time.perf_counter()
        try:
            mig.migrate(source, target, batch_size=batch_size, on_batch=hook)
        except Stop:
            pass
        seconds += time.perf_counter() - began
        out["interrupted_after_batches"] = stop_after
    began = time.perf_counter()
    report = mig.migrate(source, target, batch_size=batch_size, resume=stop_after is not None, sample=20)
    total = time.perf_counter() - began
    copied += report.memories
    out.update(memories_in_last_run=report.memories, messages_in_last_run=report.messages, vectors=report.vectors,
               users=report.users, copy_s=round(seconds + report.seconds, 2),
               with_verification_s=round(seconds + total, 2), mismatches=report.mismatches, resumed=report.resumed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default="/work/shared/data/locomo_dev.json")
    parser.add_argument("--stop-after", type=int, default=5, help="batches before the interruption")
    parser.add_argument("--batch-size", type=int, default=500)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="migrate-locomo-"))
    original, back = folder / "locomo.db", folder / "back.db"
    began = time.perf_counter()
    questions = build(original, args.data)
    result: dict[str, Any] = {"build_s": round(time.perf_counter() - began, 1)}
    with postgres_server() as server:
        pg = server.create_database("migrate_locomo")
        result["to_postgres"] = leg(str(original), pg, stop_after=args.stop_after, batch_size=args.batch_size)
        result["to_sqlite"] = leg(pg, str(back), batch_size=args.batch_size)
        with mig.open_url(str(original)) as a, mig.open_url(pg) as p, mig.open_url(str(back)) as b:
            result["memories"] = sum(1 for u in a.users() for batch in a.iter_memories(u) for _ in batch)
            result["messages"] = sum(1 for u in a.users() for batch in a.iter_messages(u) for _ in batch)
            result["differences_postgres"] = differences(a, p)[:20]
            result["differences_back"] = differences(a, b)[:20]
            on_pg = answers(p, questions)
        first, last = answers(original, questions), answers(back, questions)
    result["questions"] = len(questions)
    result["identical_retrieval_sqlite_roundtrip"] = sum(x == y for x, y in zip(first, last))
    result["identical_top10_ids_postgres"] = sum([i for i, _ in x] == [i for i, _ in y] for x, y in zip(first, on_pg))
    for name in ("to_postgres", "to_sqlite"):
        result[name]["memories_per_s"] = round(result["memories"] / result[name]["copy_s"], 1)
    print(json.dumps(result, indent=2, default=str))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
