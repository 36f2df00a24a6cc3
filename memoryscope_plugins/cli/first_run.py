"""The commands of a first run: ``demo``, ``chat`` and ``parse-time``."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from .engine_args import CommandGroup, engine_from_args


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    run_demo(sys.stdout)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from .chat import run_chat
    with engine_from_args(args) as memory:
        return run_chat(memory, user_id=args.user, agent_id=args.agent)


def cmd_parse_time(args: argparse.Namespace) -> int:
    from ..timeparse import parse_time_json
    from ..validation import check_time
    check_time(args.now, "--now")  # a readable error for a bad or out-of-range time
    now = datetime.fromisoformat(args.now.strip()) if args.now else datetime.now().astimezone()
    print(json.dumps(parse_time_json(args.text, now), ensure_ascii=False))
    return 0


def add_parsers(sub: CommandGroup) -> None:
    """Add ``demo``, ``chat`` and ``parse-time`` to the CLI's subparsers."""
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
