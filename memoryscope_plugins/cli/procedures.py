"""The commands over an agent's procedures (task memory, docs/procedural.md): ``procedures`` lists them,
``edit-procedure`` corrects one (checked as the engine's `update_procedure` checks it) and
``delete-procedure`` removes one, ``export-procedures`` and ``import-procedures`` move an agent's
procedures of one team to and from JSON Lines. Like ``delete`` (one memory), deleting one procedure
does not ask; only ``delete-all`` does."""

from __future__ import annotations

import argparse
import json
import sys

from ..types import Memory
from .engine_args import CommandGroup, engine_from_args, existing_engine, int_between
from .wording import count_of, say_exported

TEAM_HELP = "the team (tenant) whose runs taught them: a user id's part before ':' (default: none)"


def procedure_lines(procedure: Memory) -> list[str]:
    """A procedure as lines of text: its id, state and text, then its tools and counters."""
    data = procedure.metadata
    state = "" if procedure.status.value == "active" else \
        f" [{procedure.status.value}, replaced by {procedure.superseded_by}]"
    return [f"{procedure.id}{state}: {procedure.content}",
            f"  tools {', '.join(data.get('tools') or [])}; runs {data.get('runs', 1)}, uses {data.get('uses', 0)} "
            f"({data.get('successes', 0)} succeeded, {data.get('failures', 0)} failed), weight "
            f"{float(data.get('weight', 1.0)):.2f}"]


def cmd_procedures(args: argparse.Namespace) -> int:
    with existing_engine(args) as memory:
        found = memory.procedures(args.agent, team=args.team, include_expired=args.all, limit=args.limit)
    if args.json:
        print(json.dumps([m.to_dict() for m in found], ensure_ascii=False, indent=1))
        return 0
    if not found:
        print(f"no procedures of agent {args.agent!r}" + (f" for team {args.team!r}" if args.team else ""))
    for procedure in found:
        print("\n".join(procedure_lines(procedure)))
    return 0


def cmd_edit_procedure(args: argparse.Namespace) -> int:
    if args.when is None and args.do is None and args.why is None and args.tools is None:
        print("error: nothing to change: give --when, --do, --why or --tools", file=sys.stderr)
        return 2
    with existing_engine(args) as memory:
        edited = memory.update_procedure(args.agent, args.id, team=args.team, when=args.when, do=args.do,
                                         why=args.why, tools=args.tools)
    if args.json:
        print(json.dumps(edited.to_dict(), ensure_ascii=False, indent=1))
    else:
        print("\n".join(procedure_lines(edited)))
    return 0


def cmd_delete_procedure(args: argparse.Namespace) -> int:
    with existing_engine(args) as memory:
        memory.delete_procedure(args.agent, args.id, team=args.team)
    print(f"deleted {args.id}")
    return 0


def _counted(count: int) -> str:
    return count_of(count, "procedure")


def cmd_export_procedures(args: argparse.Namespace) -> int:
    with existing_engine(args) as memory:
        count = memory.export_procedures(args.agent, args.file, team=args.team)
    say_exported(_counted(count), args.file)
    return 0


def cmd_import_procedures(args: argparse.Namespace) -> int:
    with engine_from_args(args) as memory:
        print(f"imported {_counted(memory.import_procedures(args.agent, args.file, team=args.team))}")
    return 0


def add_parsers(sub: CommandGroup) -> None:
    """Add ``procedures``, ``edit-procedure``, ``delete-procedure``, ``export-procedures`` and
    ``import-procedures`` to the CLI's subparsers."""
    p = sub.add_parser("procedures", help="an agent's procedures learnt from its runs (procedures.enabled)")
    p.add_argument("agent", help="the agent id")
    p.add_argument("--team", default="", help=TEAM_HELP)
    p.add_argument("--all", action="store_true", help="also the expired ones")
    p.add_argument("--limit", type=int_between(1, 10_000), default=100)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_procedures)

    p = sub.add_parser("edit-procedure", help="correct one of an agent's procedures (what is not given is kept)")
    p.add_argument("agent", help="the agent id")
    p.add_argument("id", help="the procedure's id (`procedures AGENT` lists them)")
    p.add_argument("--team", default="", help=TEAM_HELP)
    p.add_argument("--when", default=None, help="when it applies")
    p.add_argument("--do", default=None, help="what to do")
    p.add_argument("--why", default=None, help='why ("" removes the reason)')
    p.add_argument("--tools", nargs="+", default=None, metavar="TOOL",
                   help="the tools it names: some of those it names already, never another")
    p.add_argument("--json", action="store_true", help="print the edited procedure as JSON")
    p.set_defaults(func=cmd_edit_procedure)

    p = sub.add_parser("delete-procedure", help="delete one of an agent's procedures (does not ask, as `delete`)")
    p.add_argument("agent", help="the agent id")
    p.add_argument("id", help="the procedure's id")
    p.add_argument("--team", default="", help=TEAM_HELP)
    p.set_defaults(func=cmd_delete_procedure)

    p = sub.add_parser("export-procedures", help="export an agent's procedures (of one team) as JSON Lines")
    p.add_argument("agent", help="the agent id")
    p.add_argument("file", help="a file (replaced atomically), a symbolic link (written through), a FIFO or "
                                "device (written directly), or - for standard output")
    p.add_argument("--team", default="", help=TEAM_HELP)
    p.set_defaults(func=cmd_export_procedures)

    p = sub.add_parser("import-procedures", help="import an agent's procedures (of one team) from JSON Lines "
                                                 "(all or nothing)")
    p.add_argument("agent", help="the agent id: every line must be its procedure")
    p.add_argument("file")
    p.add_argument("--team", default="", help=TEAM_HELP + "; every line must be of it")
    p.set_defaults(func=cmd_import_procedures)
