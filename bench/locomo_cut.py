"""A LoCoMo-format file cut to the first sessions of some conversations, for runs that cannot
afford whole conversations (`bench qa --configs consolidated` with a small local model: 1-2 hours
per whole LoCoMo conversation on a 2-core machine).

    python bench/locomo_cut.py ../shared/data/locomo_dev.json locomo_2conv_s6.json \\
        --conversations conv-26,conv-49 --sessions 6

Kept: the named conversations (all when none are named), their first N sessions with their dates,
and only the questions whose every evidence turn ("D3:12": session 3) lies in those sessions; a
question without evidence is dropped, since nothing says it can be answered from the cut. The
per-session extras LoCoMo carries (observations, summaries) are cut the same way. The source file
is only read.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_SESSION_KEY = re.compile(r"(?:^|_)session_(\d+)(?:_|$)")  # session_3, session_3_date_time, events_session_3
_EVIDENCE = re.compile(r"^D(\d+):\d+$")


def _session(key: str) -> int | None:
    match = _SESSION_KEY.search(key)
    return int(match.group(1)) if match else None


def answerable(question: dict[str, Any], sessions: int) -> bool:
    """Whether every evidence turn of `question` lies in the first `sessions` sessions."""
    evidence = [_EVIDENCE.match(str(e).strip()) for e in question.get("evidence") or []]
    return bool(evidence) and all(m is not None and int(m.group(1)) <= sessions for m in evidence)


def cut(conversations: Sequence[dict[str, Any]], ids: Sequence[str] | None, sessions: int) -> list[dict[str, Any]]:
    """The conversations named by `ids` (all when None), each cut to its first `sessions` sessions
    and the questions answerable from them. Raises ValueError for an unknown id or sessions < 1."""
    if sessions < 1:
        raise ValueError("sessions must be at least 1")
    known = {c.get("sample_id") for c in conversations}
    unknown = sorted(set(ids or ()) - known)
    if unknown:
        raise ValueError(f"no conversation {unknown}")
    out = []
    for conversation in conversations:
        if ids is not None and conversation.get("sample_id") not in ids:
            continue
        kept = copy.deepcopy(conversation)
        for part in ("conversation", "observation", "session_summary", "event_summary"):
            if isinstance(kept.get(part), dict):
                kept[part] = {k: v for k, v in kept[part].items() if (_session(k) or 0) <= sessions}
        kept["qa"] = [q for q in kept.get("qa", []) if answerable(q, sessions)]
        out.append(kept)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a LoCoMo-format file")
    parser.add_argument("out", type=Path, help="the file to write (never the input)")
    parser.add_argument("--conversations", default=None, help="comma-separated sample ids (default: all)")
    parser.add_argument("--sessions", type=int, required=True, help="keep the first N sessions")
    args = parser.parse_args(argv)
    if args.out.resolve() == args.data.resolve():
        parser.error("out must not be the input file")
    ids = [i.strip() for i in args.conversations.split(",") if i.strip()] if args.conversations else None
    try:
        kept = cut(json.loads(args.data.read_text(encoding="utf-8")), ids, args.sessions)
    except ValueError as exc:
        parser.error(str(exc))
    args.out.write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
    for conversation in kept:
        turns = sum(len(v) for k, v in conversation["conversation"].items() if isinstance(v, list))
        print(f"{conversation.get('sample_id')}: {turns} turns, {len(conversation['qa'])} questions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
