"""How much of the evidence reaches the context block, and at what size, per `top_k`,
`context_neighbours` and `context_hop` (no LLM): the share of a LoCoMo question's evidence turns
among the block's memories, neighbour turns and second-hop lines, per category (c1 multi-hop, c2
temporal, c3 open-domain, c4 single-hop), and the block's length.

    python bench/context_coverage.py --data ../shared/data/locomo_dev.json \
        --configs 10:5:0,10:5:3,15:5:0      # top_k:context_neighbours[:context_hop[:context_hop_hits]]
    MEMORYSCOPE_LANGUAGE=zh python bench/context_coverage.py --data ../shared/data/zh_memory_dev.json

Conversations are recorded once into --db (a fresh temporary store unless given; reused when it
exists), as `bench locomo` records them. Categories 1-4; each question asked the day after its
conversation's last session. Tokens are estimated as characters / 4 (CJK: one per character).
"""

from __future__ import annotations

import argparse
import statistics
from datetime import timedelta
from pathlib import Path

from memoryscope_plugins.bench.locomo import covered_turns, load_conversations
from memoryscope_plugins.bench.recorded import recorded_turns


def _tokens(text: str) -> float:
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    return cjk + (len(text) - cjk) / 4.0


def _configs(text: str) -> list[tuple[int, int, int | None, int | None]]:
    """"top_k:neighbours[:hop[:hop_hits]]" items; a hop left out keeps the settings' own."""
    out = []
    for part in text.split(","):
        top_k, *rest = [int(f) for f in part.split(":")]
        neighbours, hop, hop_hits = [*rest, None, None, None][:3]
        out.append((top_k, int(neighbours or 0), hop, hop_hits))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--configs", default="5:0,5:5,8:4,10:0,10:3,10:5,10:10,15:0,15:5,20:0",
                        help="top_k:context_neighbours[:context_hop[:context_hop_hits]], comma-separated")
    parser.add_argument("--db", type=Path, help="store to record into or reuse (default: a temporary one)")
    args = parser.parse_args()
    conversations = load_conversations(args.data)
    with recorded_turns(conversations, args.db, prefix="memoryscope-coverage-") as memory:
        print("| top_k | neighbours of the best | hop lines / from hits | evidence in the block | tokens "
              "| c1 | c2 | c3 | c4 |")
        print("|---|---|---|---|---|---|---|---|---|")
        base = memory.settings.retrieval
        for top_k, neighbours, hop, hop_hits in _configs(args.configs):
            memory.settings.retrieval = base.model_copy(update={
                "context_neighbours": neighbours,
                "context_hop": base.context_hop if hop is None else hop,
                "context_hop_hits": base.context_hop_hits if hop_hits is None else hop_hits})
            cfg = memory.settings.retrieval
            rows = []
            for conv in conversations:
                now = conv.sessions[-1].when + timedelta(days=1)
                for question in conv.questions:
                    if question.category not in (1, 2, 3, 4):
                        continue
                    result = memory.retrieve(conv.id, question.text, top_k=top_k, now=now)
                    shown = {i for item in result.memories for i in covered_turns(item.memory.metadata)}
                    shown |= {i for m in [*result.neighbours, *result.second_hop]
                              for i in covered_turns(m.metadata)}
                    gold = set(question.gold)
                    rows.append((question.category, len(gold & shown) / len(gold), _tokens(result.context)))
            by_category = [statistics.fmean([r[1] for r in rows if r[0] == c] or [0.0]) for c in (1, 2, 3, 4)]
            print(f"| {top_k} | {neighbours} | {cfg.context_hop} / {cfg.context_hop_hits} | "
                  f"{statistics.fmean(r[1] for r in rows):.3f} | "
                  f"{statistics.fmean(r[2] for r in rows):.0f} | "
                  + " | ".join(f"{v:.3f}" for v in by_category) + " |", flush=True)


if __name__ == "__main__":
    main()
