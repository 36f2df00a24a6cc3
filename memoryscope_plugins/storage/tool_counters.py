"""The tool statistics' counters, shared by every backend (docs/procedural.md).

A logged tool call adds 1 to a few counters of its (user, agent, tool): ``call``; ``fail`` and
``error``/<normalised error> when it failed; ``latency``/<bucket> when it has a duration;
``shape_ok`` or ``shape_fail``/<argument shape>; a call whose outcome was never seen (status
``unknown``) adds ``call``, ``unknown`` and its latency only (a counter kind is a text key: no
store's schema knows the kinds). Each counter also keeps the first and last message
time (whole microseconds since the epoch) of the calls it counts. The store adds them in the same
transaction (or bulk request) that logs the messages, so the counters are always the fold of the
logged tool calls: a message the log refuses (an id logged already) counts nothing, copying a log
(`copy_messages`, `migrate`) rebuilds them, and deleting or renaming a user deletes or moves them.

Counters are additive (an upsert adds to the stored count and widens the time span), so concurrent
writers never lose an update and the order of the writes does not matter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from .. import tool_calls
from .records import MESSAGE_WRITE_COLUMNS, TOOL_CALL_KEY
from .timecodes import epoch_microseconds

CALL, FAIL, ERROR, LATENCY, SHAPE_OK, SHAPE_FAIL = "call", "fail", "error", "latency", "shape_ok", "shape_fail"
UNKNOWN = "unknown"
KINDS = (CALL, FAIL, ERROR, LATENCY, SHAPE_OK, SHAPE_FAIL, UNKNOWN)

_USER, _AGENT, _ROLE, _TIME, _METADATA = (MESSAGE_WRITE_COLUMNS.index(c)
                                          for c in ("user_id", "agent_id", "role", "timestamp", "metadata"))

SQLITE_DDL = """CREATE TABLE IF NOT EXISTS tool_counters (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    n INTEGER NOT NULL,
    first_us INTEGER NOT NULL,
    last_us INTEGER NOT NULL,
    PRIMARY KEY (user_id, agent_id, tool, kind, key)
);
CREATE INDEX IF NOT EXISTS tool_counters_team ON tool_counters(agent_id, tool, user_id);
DROP INDEX IF EXISTS tool_counters_agent"""
SQLITE_INDEX = "tool_counters_team"  # a file without it is brought up to date when opened
SQLITE_UPSERT = ("INSERT INTO tool_counters(user_id, agent_id, tool, kind, key, n, first_us, last_us) "
                 "VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(user_id, agent_id, tool, kind, key) DO UPDATE SET "
                 "n = n + excluded.n, first_us = min(first_us, excluded.first_us), "
                 "last_us = max(last_us, excluded.last_us)")

POSTGRES_DDL = [
    """CREATE TABLE IF NOT EXISTS {p}tool_counters (
        user_id text NOT NULL,
        agent_id text NOT NULL,
        tool text NOT NULL,
        kind text NOT NULL,
        key text NOT NULL,
        n bigint NOT NULL,
        first_us bigint NOT NULL,
        last_us bigint NOT NULL,
        PRIMARY KEY (user_id, agent_id, tool, kind, key)
    )""",
    "CREATE INDEX IF NOT EXISTS {p}tool_counters_agent ON {p}tool_counters (agent_id, tool)",
]
# version 6: a team's read (`read_clauses`) is a range of user ids under the agent's tool; the index
# compares them byte by byte ("C"), as the read does, whatever the database's collation
POSTGRES_TEAM_INDEX = [
    'CREATE INDEX IF NOT EXISTS {p}tool_counters_team ON {p}tool_counters (agent_id, tool, user_id COLLATE "C")',
    "DROP INDEX IF EXISTS {p}tool_counters_agent",
]
POSTGRES_UPSERT = ("INSERT INTO {tool_counters} AS c (user_id, agent_id, tool, kind, key, n, first_us, last_us) "
                   "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, agent_id, tool, kind, key) "
                   "DO UPDATE SET n = c.n + excluded.n, first_us = LEAST(c.first_us, excluded.first_us), "
                   "last_us = GREATEST(c.last_us, excluded.last_us)")


@dataclass(frozen=True, slots=True)
class Increment:
    """What one write adds to one counter."""

    user_id: str
    agent_id: str
    tool: str
    kind: str
    key: str
    n: int
    first_us: int
    last_us: int

    def row(self) -> tuple[Any, ...]:
        return (self.user_id, self.agent_id, self.tool, self.kind, self.key, self.n, self.first_us, self.last_us)


@dataclass(frozen=True, slots=True)
class Counter:
    """One counter of a tool as read: summed over the users asked for."""

    tool: str
    kind: str
    key: str
    n: int
    first_us: int
    last_us: int


def call_counters(call: dict[str, Any]) -> list[tuple[str, str]]:
    """The (kind, key) counters one logged call (its `ToolCall.to_dict`) adds 1 to."""
    failed = call.get("status") == "error"
    out = [(CALL, "")]
    if failed:
        out += [(FAIL, ""), (ERROR, tool_calls.normalise_error(call.get("error"), call.get("arguments")))]
    if call.get("duration_ms") is not None:
        out.append((LATENCY, str(tool_calls.latency_bucket(float(call["duration_ms"])))))
    if call.get("status") == "unknown":  # neither succeeded nor failed: no shape's side to count it on
        return [*out, (UNKNOWN, "")]
    out.append((SHAPE_FAIL if failed else SHAPE_OK, tool_calls.argument_shape(call.get("arguments") or {})))
    return out


def increments(rows: Sequence[Sequence[Any]]) -> list[Increment]:
    """What logging these message rows (`MESSAGE_WRITE_COLUMNS` order) adds to the counters, one
    increment per counter, sorted (writers then lock counter rows in one order: no deadlock)."""
    merged: dict[tuple[str, str, str, str, str], list[int]] = {}
    for row in rows:
        if row[_ROLE] != "tool" or TOOL_CALL_KEY not in (row[_METADATA] or ""):
            continue
        call = json.loads(row[_METADATA]).get(TOOL_CALL_KEY)
        if not isinstance(call, dict):
            continue
        moment = epoch_microseconds(datetime.fromisoformat(row[_TIME]))
        assert moment is not None
        for kind, key in call_counters(call):
            slot = (row[_USER], row[_AGENT], call["name"], kind, key)
            found = merged.get(slot)
            if found is None:
                merged[slot] = [1, moment, moment]
            else:
                found[0] += 1
                found[1], found[2] = min(found[1], moment), max(found[2], moment)
    return [Increment(*slot, *values) for slot, values in sorted(merged.items())]


def read_clauses(agent_id: str, tool: str | None, user_id: str | None, marker: str,
                 team: str | None = None, *, postgres: bool = False) -> tuple[str, list[str]]:
    """The WHERE clause (with `marker` as the SQL parameter marker) and its values of a counter read:
    the agent's counters (of one tool, of one user, of the users of one `team`, when given).

    A team's users are those whose id starts with ``<team>:``: a range of ids, ``<team>:`` to
    ``<team>;`` (``;`` follows ``:``), compared byte by byte, which the index on (agent_id, tool,
    user_id) answers; team "" is the ids without ``:``, read from the agent's tool's counters."""
    clauses, values = [f"agent_id = {marker}"], [agent_id]
    if tool is not None:
        clauses.append(f"tool = {marker}")
        values.append(tool)
    if user_id is not None:
        clauses.append(f"user_id = {marker}")
        values.append(user_id)
    if team == "":
        clauses.append("strpos(user_id, ':') = 0" if postgres else "instr(user_id, ':') = 0")
    elif team is not None:
        column = 'user_id COLLATE "C"' if postgres else "user_id"
        clauses.append(f"{column} >= {marker} AND {column} < {marker}")
        values += list(team_range(team))
    return " AND ".join(clauses), values


def team_range(team: str) -> tuple[str, str]:
    """The user ids of a team (not ""): those from the first bound (included) to the second (not)."""
    return f"{team}:", f"{team};"


def summed(rows: Sequence[Sequence[Any]]) -> list[Counter]:
    """Counters from (tool, kind, key, n, first_us, last_us) rows, summed per (tool, kind, key)."""
    out: dict[tuple[str, str, str], list[int]] = {}
    for tool, kind, key, n, first, last in rows:
        found = out.get((tool, kind, key))
        if found is None:
            out[(tool, kind, key)] = [int(n), int(first), int(last)]
        else:
            found[0] += int(n)
            found[1], found[2] = min(found[1], int(first)), max(found[2], int(last))
    return [Counter(*slot, *values) for slot, values in sorted(out.items())]
