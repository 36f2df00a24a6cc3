"""``bench``: the benchmarks that ship in the CLI (LoCoMo retrieval, consolidation scenarios, procedures,
question answering and its hand labels)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import MemoryScopeError
from .engine_args import CommandGroup, settings_from_args as _settings


def _write_report(out: str, report: dict) -> None:
    """A benchmark report to --out, by export's rules (a file replaced whole, a link written through)."""
    from ..bench.report_file import write_report
    write_report(out, json.dumps(report, indent=1, ensure_ascii=False))
    print(f"report written to {out}", file=sys.stderr)


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.locomo import format_table, run_locomo
    settings = _settings(args)
    report = run_locomo(args.data, mode=args.mode, settings=settings, limit_conversations=args.limit,
                        on_progress=lambda line: print(line, file=sys.stderr), baselines=args.baseline)
    print(format_table(report))
    if args.out:
        _write_report(args.out, report)
    return 0


def cmd_bench_consolidation(args: argparse.Namespace) -> int:
    from ..bench.consolidation import format_table, run_consolidation_bench
    settings = _settings(args)
    report = run_consolidation_bench(args.scenarios, settings, on_progress=lambda line: print(line, file=sys.stderr))
    print(format_table(report))
    if args.out:
        _write_report(args.out, report)
    return 0


def cmd_bench_procedural(args: argparse.Namespace) -> int:
    from ..bench.procedural import format_table, run_procedural_bench
    settings = _settings(args)
    try:
        report = run_procedural_bench(args.data, settings, learning=False if args.no_learning else None,
                                      agent=args.agent, limit=args.limit,
                                      on_progress=lambda line: print(line, file=sys.stderr))
    except MemoryScopeError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(format_table(report))
    if args.out:
        _write_report(args.out, report)
    return 0


def _judge_settings(args: argparse.Namespace, settings):
    """The judge's model: --judge-config's llm, else the answering llm, with --judge-* on top (a
    judge on another endpoint does not inherit the answering model's key)."""
    from ..settings import Settings
    base = Settings.load(args.judge_config).llm if args.judge_config else settings.llm
    update = {key: value for key, value in (("provider", args.judge_provider), ("model", args.judge_model),
                                            ("base_url", args.judge_base_url)) if value}
    if update.get("base_url", base.base_url) != base.base_url or update.get("provider", base.provider) != base.provider:
        update["api_key"] = None
    return base.model_copy(update=update)


def cmd_bench_qa(args: argparse.Namespace) -> int:
    from ..bench.qa import (
        QAInputError,
        QAOptions,
        format_table,
        parse_categories,
        parse_configs,
        run_qa,
    )
    try:
        settings = _settings(args)
        options = QAOptions(data=Path(args.data), configs=parse_configs(args.configs),
                            out=Path(args.out) if args.out else None, limit=args.limit, seed=args.seed,
                            categories=parse_categories(args.categories), top_k=args.top_k,
                            max_context_tokens=args.max_context_tokens, rejudge=args.rejudge,
                            redo=parse_configs(args.redo, "--redo") if args.redo is not None else [])
        if args.estimate:
            from ..bench.qa import QARun, format_estimate
            print(format_estimate(QARun(options, settings, _judge_settings(args, settings)).estimate()))
            return 0
        report = run_qa(options, settings, _judge_settings(args, settings), progress=not args.no_progress)
    except QAInputError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except MemoryScopeError as exc:
        hint = f"; progress is kept in {args.out}: rerun the same command to continue" if args.out else ""
        print(f"error: {' '.join(str(exc).split())}{hint}", file=sys.stderr)
        return 1
    print(format_table(report))
    if args.out:
        print(f"report written to {args.out}", file=sys.stderr)
    return 0


def cmd_bench_qa_label(args: argparse.Namespace) -> int:
    from ..bench.qa import QAInputError
    from ..bench.qa_label import format_agreement, run_label
    try:
        result = run_label(Path(args.input), Path(args.out), limit=args.limit, seed=args.seed)
    except QAInputError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if result is None:
        print(f"wrote answers to label to {args.out}: set each \"label\" to 1 (correct) or 0 (wrong), "
              "then run the same command again")
    else:
        print(format_agreement(result))
    return 0


def _add_locomo(bench: Any) -> None:
    p = bench.add_parser("locomo", help="LoCoMo retrieval benchmark (recall@k, latency)")
    p.add_argument("--data", required=True, help="a file in LoCoMo's locomo10.json format")
    p.add_argument("--mode", choices=["turns", "observations"], default="turns")
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--limit", type=int, help="only the first N conversations")
    p.add_argument("--baseline", action="append", choices=["cosine"], default=[],
                   help="also rank every question by this baseline over the same memories, in the same run "
                        "(cosine: the embedder alone over each memory's dated words, what a vector-only memory does)")
    p.set_defaults(func=cmd_bench)


def _add_consolidation(bench: Any) -> None:
    p = bench.add_parser("consolidation", help="consolidation scenarios scored end to end with the configured LLM")
    p.add_argument("--scenarios", required=True, help="a JSON list of scenarios (format: docs/consolidation.md)")
    p.add_argument("--out", help="write the JSON report here")
    p.set_defaults(func=cmd_bench_consolidation)


def _add_procedural(bench: Any) -> None:
    p = bench.add_parser("procedural", help="procedures: retrieval of the right one (no model), and with the "
                                            "configured LLM what it learns and whether the agent avoids an error")
    p.add_argument("--data", required=True, help="a JSON list of procedural scenarios (format: docs/benchmarks.md)")
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--no-learning", action="store_true",
                   help="only the retrieval part, even with an LLM configured")
    p.add_argument("--agent", action="store_true",
                   help="also ask the model, as the agent, for its first tool call on each new task, with and "
                        "without the procedures retrieved (needs an LLM)")
    p.add_argument("--limit", type=int, help="the learning and agent parts on the first N scenarios only")
    p.set_defaults(func=cmd_bench_procedural)


def _add_qa(bench: Any) -> None:
    p = bench.add_parser("qa", help="question answering on LoCoMo-format data, judged (J, F1), per context")
    p.add_argument("--data", required=True, help="a file in LoCoMo's locomo10.json format (with answers)")
    p.add_argument("--configs", default="none,vector,turns",
                   help="comma-separated: none, full, vector, turns, observations, consolidated "
                        "(default none,vector,turns)")
    p.add_argument("--limit", type=int, help="a sample of N questions stratified over the categories")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--categories", default="1,2,3,4", help="question categories (default 1,2,3,4)")
    p.add_argument("--top-k", type=int, default=None, help="memories per question (default retrieval.top_k)")
    p.add_argument("--max-context-tokens", type=int, default=30000,
                   help="skip `full` for a conversation whose prompt is estimated above this (default 30000)")
    p.add_argument("--out", help="the JSON report; also the state a rerun continues from")
    p.add_argument("--judge-config", help="a settings file whose llm is the judge (default: the answering llm)")
    p.add_argument("--judge-provider", choices=["openai", "dashscope"], help="the judge's provider")
    p.add_argument("--judge-model", help="the judge's model")
    p.add_argument("--judge-base-url", help="the judge's endpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--rejudge", action="store_true",
                   help="decide every answer of --out again with the current rules (LLM verdicts the rules "
                        "still leave to the LLM are kept)")
    p.add_argument("--redo", metavar="LIST",
                   help="comma-separated configurations (also in --configs) whose answers in --out are made "
                        "again, with their verdicts: after a code change (a changed setting of the embedder, "
                        "retrieval or consolidation makes the configurations that use it again by itself); "
                        "if such a run stops, continue it without --redo")
    p.add_argument("--estimate", action="store_true",
                   help="print the expected calls and prompt tokens, call no model, write nothing")
    p.set_defaults(func=cmd_bench_qa)


def _add_qa_label(bench: Any) -> None:
    p = bench.add_parser("qa-label", help="hand labels for bench qa's judge: write a sample, then measure agreement")
    p.add_argument("--in", dest="input", required=True, help="a bench qa result")
    p.add_argument("--out", required=True, help="the labels file (written if absent, read if present)")
    p.add_argument("--limit", type=int, default=60, help="answers to label (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_bench_qa_label)


def add_parsers(sub: CommandGroup) -> None:
    """Add ``bench`` and its subcommands to the CLI's subparsers."""
    bench = sub.add_group(sub.add_parser("bench", help="benchmarks"), dest="bench", required=True)
    for add in (_add_locomo, _add_consolidation, _add_procedural, _add_qa, _add_qa_label):
        add(bench)
