"""Before and after a retrieval change, on the same `bench qa` questions, answering only what changed.

    # the `turns` block of every sampled question, with the code on PYTHONPATH (once per version)
    PYTHONPATH=old python bench/qa_blocks.py dump --config local.yaml --data locomo_dev.json \\
        --limit 150 --seed 1 --out blocks_before.json
    PYTHONPATH=new python bench/qa_blocks.py dump ... --out blocks_after.json
    # the questions whose block differs, answered and judged with the "before" block
    python bench/qa_blocks.py answer --config local.yaml --data locomo_dev.json --limit 150 --seed 1 \\
        --blocks blocks_before.json --other blocks_after.json --out before_answers.json

A question whose block is the same byte for byte gets the same prompt, so a `bench qa` run of one
version stands for the other on it; only the questions whose block changed need answering again.
`answer` uses `bench qa`'s own prompt, model settings and judge (its rules first, then the model),
and is resumable (answers already in --out are kept). Blocks are built exactly as `bench qa`'s
`turns` configuration builds them (fresh stores, the same ingest and question time).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memoryscope_plugins.bench.qa import QAOptions, QARun, question_id
from memoryscope_plugins.settings import Settings


def _run(args: argparse.Namespace) -> tuple[Settings, QARun]:
    settings = Settings.load(args.config)
    options = QAOptions(data=Path(args.data), configs=["turns"], limit=args.limit, seed=args.seed)
    return settings, QARun(options, settings, progress=False)


def dump(args: argparse.Namespace) -> None:
    _settings, run = _run(args)
    blocks = {}
    with run.open_stores() as stores:
        for conv, question in run.items:
            block, _ms = run.context(stores, conv, question, "turns")
            blocks[question_id(conv, question)] = block
    Path(args.out).write_text(json.dumps(blocks, ensure_ascii=False, indent=0), encoding="utf-8")
    print(f"{len(blocks)} blocks -> {args.out}")


def answer(args: argparse.Namespace) -> None:
    blocks = json.loads(Path(args.blocks).read_text(encoding="utf-8"))
    other = json.loads(Path(args.other).read_text(encoding="utf-8"))
    _settings, run = _run(args)
    run.connect()
    out = Path(args.out)
    done: dict[str, Any] = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    changed = [(c, q) for c, q in run.items if blocks[question_id(c, q)] != other[question_id(c, q)]]
    print(f"{len(changed)} of {len(run.items)} blocks differ")
    for conv, question in changed:
        qid = question_id(conv, question)
        if qid in done:
            continue
        result = run.answer_with_block(conv, question, "turns", blocks[qid])
        run.judge_answer(conv, question, result, cache)
        done[qid] = result
        out.write_text(json.dumps(done, ensure_ascii=False, indent=1), encoding="utf-8")
        print(qid, result["j"], result["text"][:80], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("dump", dump), ("answer", answer)):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True, help="a settings file (its llm answers and judges)")
        p.add_argument("--data", required=True, help="a LoCoMo-format file")
        p.add_argument("--limit", type=int, default=None)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", required=True)
        if name == "answer":
            p.add_argument("--blocks", required=True, help="the blocks to answer with")
            p.add_argument("--other", required=True, help="the other version's blocks")
        p.set_defaults(func=func)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
