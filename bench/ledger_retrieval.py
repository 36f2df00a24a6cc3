"""Retrieval through the entity ledger, measured without an LLM: evidence coverage of the context
block (as bench/context_coverage.py counts it), R@10 of the ranked memories, and the second hop's
own cost, with the ledger a user would have.

    python bench/ledger_retrieval.py --data ../shared/data/locomo_dev.json --db /tmp/cov_en.db

Ledgers (`--ledger`, comma-separated, each measured):
- ``none``: no entities (a user before this feature: the hop searches by full text);
- ``speakers``: the named speakers, with a mention in each turn naming them (what `record` alone gives);
- ``names``: the speakers and every capitalised name said at least twice in the conversation (the
  second hop's own name heuristic over all turns), a stand-in for the ledger consolidation builds.

Configurations (`--configs`): ``hop0`` (no hop), ``search`` (the full-text hop), ``ledger`` (the
ledger hop, ``auto`` source), ``entity`` (``ledger`` plus entity questions; the others run without
them). Conversations are recorded into --db once (reused when it exists), as context_coverage does.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.bench.locomo import covered_turns, load_conversations
from memoryscope_plugins.bench.recorded import recorded_turns
from memoryscope_plugins.person.ledger import record_mentions
from memoryscope_plugins.retrieval import ledger_cache, pipeline
from memoryscope_plugins.retrieval.second_hop import english_names
from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.types import Entity, EntityKind

CONFIGS: dict[str, dict[str, Any]] = {
    "hop0": {"context_hop": 0, "entity_questions": False},
    "search": {"context_hop": 2, "context_hop_source": "search", "entity_questions": False},
    "ledger": {"context_hop": 2, "context_hop_source": "auto", "entity_questions": False},
    "entity": {"context_hop": 2, "context_hop_source": "auto", "entity_questions": True},
}


def build_ledger(memory: MemoryScope, user: str, kind: str) -> int:
    """Replace `user`'s ledger by the `kind` one (see the module docstring); how many entities."""
    store = memory.store
    old = [e.id for e in store.entities(user)]
    if old:
        store.put_ledger(LedgerChanges(user_id=user, removed_entities=old))
    if kind == "none":
        ledger_cache.for_store(store).invalidate(user)
        return 0
    memories = [m for batch in store.iter_memories(user) for m in batch]
    names = {m.speaker for m in memories if m.speaker}
    if kind == "names":
        text = "\n".join(m.content for m in memories)
        counts = Counter(name for m in memories for name in english_names(m.content, text))
        names |= {name for name, n in counts.items() if n >= 2}
    entities = [Entity(id=f"{user}-e{i}", user_id=user, name=name, kind=EntityKind.PERSON if name in
                       {m.speaker for m in memories} else EntityKind.TOPIC) for i, name in enumerate(sorted(names))]
    store.put_ledger(LedgerChanges(user_id=user, entities=entities, mentions=record_mentions(entities, memories)))
    ledger_cache.for_store(store).invalidate(user)
    return len(entities)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--ledger", default="none,speakers,names")
    parser.add_argument("--configs", default="hop0,search,ledger,entity")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--conversations", type=int, default=0, help="the first N only (0: all)")
    args = parser.parse_args()
    conversations = load_conversations(args.data)[:args.conversations or None]
    hop_ms: list[float] = []
    real_hop = pipeline.hop

    def timed_hop(*a: Any, **k: Any) -> Any:
        started = time.process_time()  # CPU time: the machine may be shared
        try:
            return real_hop(*a, **k)
        finally:
            hop_ms.append((time.process_time() - started) * 1000)

    pipeline.hop = timed_hop
    with recorded_turns(conversations, args.db, prefix="memoryscope-ledger-") as memory:
        print("| ledger | config | entities | coverage | c1 | c2 | c3 | c4 | R@10 | hop p50 / p95 ms "
              "| retrieve p50 / p95 ms | contexts |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        base = memory.settings.retrieval
        for kind in args.ledger.split(","):
            count = sum(build_ledger(memory, conv.id, kind) for conv in conversations)
            for name in args.configs.split(","):
                memory.settings.retrieval = base.model_copy(update=CONFIGS[name])
                rows, hop_ms[:], retrieve_ms, digest = [], [], [], hashlib.sha256()
                for conv in conversations:
                    now = conv.sessions[-1].when + timedelta(days=1)
                    for question in conv.questions:
                        if question.category not in (1, 2, 3, 4):
                            continue
                        started = time.process_time()
                        result = memory.retrieve(conv.id, question.text, top_k=args.top_k, now=now)
                        retrieve_ms.append((time.process_time() - started) * 1000)
                        digest.update(result.context.encode())  # the same digest: the same blocks
                        ranked = {i for item in result.memories for i in covered_turns(item.memory.metadata)}
                        shown = ranked | {i for m in [*result.neighbours, *result.second_hop]
                                          for i in covered_turns(m.metadata)}
                        gold = set(question.gold)
                        rows.append((question.category, len(gold & shown) / len(gold),
                                     len(gold & ranked) / len(gold)))
                by_category = [statistics.fmean([r[1] for r in rows if r[0] == c] or [0.0]) for c in (1, 2, 3, 4)]
                print(f"| {kind} | {name} | {count} | {statistics.fmean(r[1] for r in rows):.3f} | "
                      + " | ".join(f"{v:.3f}" for v in by_category)
                      + f" | {statistics.fmean(r[2] for r in rows):.3f} | {_percentiles(hop_ms)} | "
                      f"{_percentiles(retrieve_ms)} | {digest.hexdigest()[:12]} |", flush=True)


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values) or [0.0]
    return f"{ordered[len(ordered) // 2]:.2f} / {ordered[int(len(ordered) * 0.95)]:.2f}"


if __name__ == "__main__":
    main()
