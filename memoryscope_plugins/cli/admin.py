"""The admin commands over the store: a user's memories (list, retrieve, add, delete, delete-all,
export, import), the users themselves (users, rename-user, reembed) and the store's counts (stats)."""

from __future__ import annotations

import argparse
import json
import sys

from .engine_args import CommandGroup, engine_from_args, existing_engine
from .wording import memories, say_exported


def _print_memory(memory, out=None) -> None:
    from ..timeparse import listing_line
    out = out or sys.stdout
    out.write(listing_line(memory) + "\n")


def cmd_list(args: argparse.Namespace) -> int:
    with existing_engine(args, user=args.user) as memory:
        items = memory.list(args.user, limit=args.limit, offset=args.offset)
    for item in items:
        _print_memory(item)
    if items:
        return 0
    print(f"no memories of {args.user!r} at offset {args.offset}" if args.offset
          else f"{args.user!r} has no memories", file=sys.stderr)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    with existing_engine(args, user=args.user) as memory:
        result = memory.retrieve(args.user, args.query, top_k=args.top_k, now=args.now)
        if args.json:
            print(json.dumps({"context": result.context, "timings_ms": result.timings_ms,
                              "memories": [{**m.memory.to_dict(), "score": m.score} for m in result.memories]},
                             ensure_ascii=False, indent=1))
        else:
            print(result.context or "(no memories)")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with engine_from_args(args) as memory:
        _print_memory(memory.add(args.user, args.text))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with existing_engine(args, user=args.user) as memory:
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
    with existing_engine(args, user=args.user) as memory:
        print(f"deleted {memories(memory.delete_all(args.user))} of {args.user}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with existing_engine(args, user=args.user) as memory:
        count = memory.export(args.user, args.file)
    say_exported(memories(count), args.file)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    with engine_from_args(args) as memory:
        print(f"imported {memories(memory.import_(args.user, args.file, progress=True))}")
    return 0


def cmd_users(args: argparse.Namespace) -> int:
    from ..validation import is_safe_id
    with existing_engine(args) as memory:
        for user in memory.legacy_users() if args.legacy else memory.users():
            print(user if is_safe_id(user) else repr(user))  # an old id may hold CR, LF or other controls
    return 0


def cmd_rename_user(args: argparse.Namespace) -> int:
    with existing_engine(args, user=args.old) as memory:
        print(f"moved {memories(memory.rename_user(args.old, args.new))} to {args.new}")
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    with existing_engine(args) as memory:  # opening re-embeds when the model changed
        print(f"vectors are current for {memory.embedder.name}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """The store's counts, as ``/metrics`` shows them, read from the store itself (no server needed)."""
    from datetime import datetime, timezone

    from ..storage.overview import store_overview
    with existing_engine(args) as memory:
        overview = store_overview(memory.store)
    now = datetime.now(timezone.utc)
    if args.json:
        print(json.dumps(overview.to_dict(now), indent=1))
        return 0
    print(f"users: {overview.users}")
    states = ", ".join(f"{n} {state}" for state, n in overview.messages.items())
    print(f"messages: {states}")
    if overview.oldest_pending is not None:
        print(f"oldest pending: {overview.oldest_pending_age_s(now):.0f} s old "
              f"(logged {overview.oldest_pending.isoformat(timespec='seconds')})")
    for kind, total in sorted(overview.memories_by_type().items()):
        by_status = ", ".join(f"{n} {status}" for (k, status), n in sorted(overview.memories.items()) if k == kind)
        print(f"{kind} memories: {total} ({by_status})")
    return 0


def add_memory_parsers(sub: CommandGroup) -> None:
    """Add the commands over one user's memories to the CLI's subparsers."""
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


def add_user_parsers(sub: CommandGroup) -> None:
    """Add the commands over the store's users to the CLI's subparsers."""
    p = sub.add_parser("users", help="list users")
    p.add_argument("--legacy", action="store_true",
                   help="only users whose id breaks the identifier rule (written by an older version)")
    p.set_defaults(func=cmd_users)

    p = sub.add_parser("rename-user", help="move a user's memories and messages to a new id (e.g. a legacy id)")
    p.add_argument("old")
    p.add_argument("new")
    p.set_defaults(func=cmd_rename_user)
    sub.add_parser("reembed", help="re-embed memories made by another embedding model").set_defaults(func=cmd_reembed)

    p = sub.add_parser("stats", help="the store's counts: users, messages per state, the oldest pending one's age "
                                     "(consolidation lag), memories per type (what /metrics shows, without a server)")
    p.add_argument("--json", action="store_true", help="print them as one JSON object")
    p.set_defaults(func=cmd_stats)
