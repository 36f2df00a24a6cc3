"""The `memoryscope-plugins` command line: demo, chat, admin, parse-time and the benchmark."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Sequence

from ..errors import MemoryScopeError
from ..log_format import FORMATS, configure_logging
from .engine_args import engine_from_args as _engine, settings_from_args as _settings


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    run_demo(sys.stdout)
    return 0


def cmd_parse_time(args: argparse.Namespace) -> int:
    from ..timeparse import parse_time_json
    from ..validation import check_time
    check_time(args.now, "--now")  # a readable error for a bad or out-of-range time
    now = datetime.fromisoformat(args.now.strip()) if args.now else datetime.now().astimezone()
    print(json.dumps(parse_time_json(args.text, now), ensure_ascii=False))
    return 0


def _write_report(out: str, report: dict) -> None:
    """A benchmark report to --out, by export's rules (a file replaced whole, a link written through)."""
    from ..safe_write import open_for_writing
    with open_for_writing(out, what="report") as handle:
        handle.write(json.dumps(report, indent=1, ensure_ascii=False))
    print(f"report written to {out}", file=sys.stderr)


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.locomo import format_table, run_locomo
    settings = _settings(args)
    report = run_locomo(args.data, mode=args.mode, settings=settings, limit_conversations=args.limit,
                        on_progress=lambda line: print(line, file=sys.stderr))
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


def cmd_chat(args: argparse.Namespace) -> int:
    from .chat import run_chat
    with _engine(args) as memory:
        return run_chat(memory, user_id=args.user, agent_id=args.agent)


def _print_memory(memory, out=None) -> None:
    from ..timeparse import listing_line
    out = out or sys.stdout
    out.write(listing_line(memory) + "\n")


def cmd_list(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        for item in memory.list(args.user, limit=args.limit, offset=args.offset):
            _print_memory(item)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        result = memory.retrieve(args.user, args.query, top_k=args.top_k, now=args.now)
        if args.json:
            print(json.dumps({"context": result.context, "timings_ms": result.timings_ms,
                              "memories": [{**m.memory.to_dict(), "score": m.score} for m in result.memories]},
                             ensure_ascii=False, indent=1))
        else:
            print(result.context or "(no memories)")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        _print_memory(memory.add(args.user, args.text))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        memory.delete(args.user, args.id)
    print(f"deleted {args.id}")
    return 0


def cmd_delete_all(args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            print("refusing to delete without --yes", file=sys.stderr)
            return 2
        answer = input(f"Delete every memory of {args.user!r}? Type the user id to confirm: ")
        if answer.strip() != args.user:
            print("cancelled")
            return 1
    with _engine(args) as memory:
        print(f"deleted {memory.delete_all(args.user)} memories of {args.user}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        count = memory.export(args.user, args.file)
    # with FILE "-" the memories went to standard output: the count goes to stderr, apart from them
    print(f"exported {count} memories to {'standard output' if args.file == '-' else args.file}",
          file=sys.stderr if args.file == "-" else sys.stdout)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        print(f"imported {memory.import_(args.user, args.file, progress=True)} memories")
    return 0


def cmd_users(args: argparse.Namespace) -> int:
    from ..validation import is_safe_id
    with _engine(args) as memory:
        for user in memory.legacy_users() if args.legacy else memory.users():
            print(user if is_safe_id(user) else repr(user))  # an old id may hold CR, LF or other controls
    return 0


def cmd_rename_user(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        print(f"moved {memory.rename_user(args.old, args.new)} memories to {args.new}")
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    with _engine(args) as memory:  # opening re-embeds when the model changed
        print(f"vectors are current for {memory.embedder.name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryscope-plugins",
                                     description="Long-term memory for LLM agents: demo, chat, admin, benchmark.")
    parser.add_argument("--config", help="YAML settings file (also $MEMORYSCOPE_CONFIG)")
    parser.add_argument("--store", help="SQLite store file (default ~/.memoryscope/memory.db)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--log-format", choices=FORMATS, default="text",
                        help="log lines as text (default) or as JSON objects for log collectors")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("demo", help="the offline demo: record a short conversation, then recall"
                   ).set_defaults(func=cmd_demo)

    p = sub.add_parser("chat", help="chat with memory in the terminal (slash commands: /help)")
    p.add_argument("--user", default="user")
    p.add_argument("--agent", default="assistant")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("parse-time", help="print the time range a text names, as JSON")
    p.add_argument("text")
    p.add_argument("--now", help="ISO 8601 moment relative times are computed from (default: now)")
    p.set_defaults(func=cmd_parse_time)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    p = bench.add_parser("locomo", help="LoCoMo retrieval benchmark (recall@k, latency)")
    p.add_argument("--data", required=True, help="a file in LoCoMo's locomo10.json format")
    p.add_argument("--mode", choices=["turns", "observations"], default="turns")
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--limit", type=int, help="only the first N conversations")
    p.set_defaults(func=cmd_bench)
    p = bench.add_parser("consolidation", help="consolidation scenarios scored end to end with the configured LLM")
    p.add_argument("--scenarios", required=True, help="a JSON list of scenarios (format: docs/consolidation.md)")
    p.add_argument("--out", help="write the JSON report here")
    p.set_defaults(func=cmd_bench_consolidation)
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
    p = bench.add_parser("qa-label", help="hand labels for bench qa's judge: write a sample, then measure agreement")
    p.add_argument("--in", dest="input", required=True, help="a bench qa result")
    p.add_argument("--out", required=True, help="the labels file (written if absent, read if present)")
    p.add_argument("--limit", type=int, default=60, help="answers to label (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_bench_qa_label)

    p = sub.add_parser("list", help="list a user's memories, newest first")
    p.add_argument("user")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("retrieve", help="what memory recalls for a query")
    p.add_argument("user")
    p.add_argument("query")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--now", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_retrieve)

    p = sub.add_parser("add", help="add a memory directly")
    p.add_argument("user")
    p.add_argument("text")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("delete", help="delete one memory")
    p.add_argument("user")
    p.add_argument("id")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("delete-all", help="delete every memory of a user")
    p.add_argument("user")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.set_defaults(func=cmd_delete_all)

    p = sub.add_parser("export", help="export a user's memories as JSON Lines")
    p.add_argument("user")
    p.add_argument("file", help="a file (replaced atomically), a symbolic link (written through), a FIFO or "
                                "device (written directly), or - for standard output")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="import memories from JSON Lines")
    p.add_argument("user")
    p.add_argument("file")
    p.set_defaults(func=cmd_import)

    from .worker import add_parser as add_worker_parser
    add_worker_parser(sub)
    from ..server.cli import add_parser as add_serve_parser
    add_serve_parser(sub)

    p = sub.add_parser("users", help="list users")
    p.add_argument("--legacy", action="store_true",
                   help="only users whose id breaks the identifier rule (written by an older version)")
    p.set_defaults(func=cmd_users)

    p = sub.add_parser("rename-user", help="move a user's memories and messages to a new id (e.g. a legacy id)")
    p.add_argument("old")
    p.add_argument("new")
    p.set_defaults(func=cmd_rename_user)
    sub.add_parser("reembed", help="re-embed memories made by another embedding model").set_defaults(func=cmd_reembed)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.log_format)
    try:
        return int(args.func(args) or 0)
    except MemoryScopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
