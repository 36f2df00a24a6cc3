"""The ``tool-stats`` command: the statistics of an agent's recorded tool calls (docs/procedural.md),
as text or (``--json``) as the `ToolStats` records (an agent's procedures: `procedures`)."""

from __future__ import annotations

import argparse
import json

from ..types import ToolStats
from .engine_args import CommandGroup, existing_engine, int_between
from .wording import count_of


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def stats_lines(stats: ToolStats) -> list[str]:
    """A tool's statistics as lines of text: a summary, then its top errors and argument shapes."""
    share = f" ({100 * stats.failures / stats.calls:.0f} %)" if stats.calls else ""
    latency = (f", p50 {_ms(stats.p50_ms)}, p95 {_ms(stats.p95_ms)} over {count_of(stats.timed_calls, 'timed call')}"
               if stats.timed_calls else ", no durations")
    first = "-" if stats.first_used is None else f"{stats.first_used:%Y-%m-%d %H:%M}"
    last = "-" if stats.last_used is None else f"{stats.last_used:%Y-%m-%d %H:%M}"
    unknown = f", {stats.unknown} without an outcome" if stats.unknown else ""
    lines = [f"{stats.tool}: {count_of(stats.calls, 'call')}, {stats.failures} failed{share}{unknown}{latency}; "
             f"first {first}, last {last} UTC"]
    lines += [f"  error x{count}: {error}" for error, count in stats.errors]
    if stats.error_kinds > len(stats.errors):
        lines.append(f"  ... {stats.error_kinds - len(stats.errors)} more kinds of error")
    lines += [f"  arguments {shape}: {ok} ok, {bad} failed" for shape, ok, bad in stats.shapes]
    if stats.shape_kinds > len(stats.shapes):
        lines.append(f"  ... {stats.shape_kinds - len(stats.shapes)} more argument shapes")
    return lines


def cmd_tool_stats(args: argparse.Namespace) -> int:
    with existing_engine(args) as memory:
        found = memory.tool_stats(args.agent, args.tool, user_id=args.user, top=args.top)
    if args.json:
        print(json.dumps([stats.to_dict() for stats in found], ensure_ascii=False, indent=1))
        return 0
    if not found:
        whose = f" for user {args.user!r}" if args.user else ""
        print(f"no recorded calls of {'tool ' + repr(args.tool) if args.tool else 'any tool'} by agent "
              f"{args.agent!r}{whose}")
    for stats in found:
        print("\n".join(stats_lines(stats)))
    return 0


def add_parser(sub: CommandGroup) -> None:
    """Add ``tool-stats`` to the CLI's subparsers."""
    p = sub.add_parser("tool-stats", help="an agent's recorded tool calls: counts, failures, latency, arguments")
    p.add_argument("agent", help="the agent id the calls were recorded under")
    p.add_argument("--tool", default=None, help="only this tool")
    p.add_argument("--user", default=None, help="only the calls made for this user")
    p.add_argument("--top", type=int_between(1, 10_000), default=10, help="errors and argument shapes shown")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tool_stats)
