"""The tool statistics' counters in Elasticsearch (`tool_counters`): one document per counter in
``<prefix>-tool-counters``, added to by a scripted upsert in the bulk request that logs the messages.

Elasticsearch has no transactions: when an item of that bulk request fails (a message id logged
already), the store undoes the items that succeeded, here by subtracting what was added, so the
counts stay the fold of the logged calls. The first and last times of a counter cannot be narrowed
back: a call undone that way may leave its time in them (reads skip counters back at 0).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from .tool_counters import Counter, Increment, summed

PROPERTIES: dict[str, Any] = {
    "slot": {"type": "keyword"}, "user_id": {"type": "keyword"}, "agent_id": {"type": "keyword"},
    "tool": {"type": "keyword"}, "kind": {"type": "keyword"}, "key": {"type": "keyword"},
    "n": {"type": "long"}, "first_us": {"type": "long"}, "last_us": {"type": "long"},
}
_ADD = ("ctx._source.n += params.n; "
        "if (params.first < ctx._source.first_us) { ctx._source.first_us = params.first } "
        "if (params.last > ctx._source.last_us) { ctx._source.last_us = params.last }")
_SUBTRACT = "ctx._source.n -= params.n"


def slot(increment: Increment) -> str:
    """The counter's document id (also a field, to sort by)."""
    key = json.dumps([increment.user_id, increment.agent_id, increment.tool, increment.kind, increment.key])
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest()


def ops(index: str, increments: Sequence[Increment]) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """Bulk operations that add the increments, and those that undo them."""
    out: list[dict[str, Any]] = []
    undo: list[dict[str, Any] | None] = []
    for inc in increments:
        doc_id = slot(inc)
        upsert = {"slot": doc_id, "user_id": inc.user_id, "agent_id": inc.agent_id, "tool": inc.tool,
                  "kind": inc.kind, "key": inc.key, "n": inc.n, "first_us": inc.first_us, "last_us": inc.last_us}
        out.append({"_op_type": "update", "_index": index, "_id": doc_id, "retry_on_conflict": 50, "_source": {
            "script": {"source": _ADD, "params": {"n": inc.n, "first": inc.first_us, "last": inc.last_us}},
            "upsert": upsert}})
        undo.append({"_op_type": "update", "_index": index, "_id": doc_id, "retry_on_conflict": 50,
                     "_source": {"script": {"source": _SUBTRACT, "params": {"n": inc.n}}}})
    return out, undo


def query(agent_id: str, tool: str | None, user_id: str | None, team: str | None = None) -> dict[str, Any]:
    """The counters of a read: the agent's (one tool's, one user's, those of the users of one team),
    skipping those undone to 0. A team's users are the ids starting ``<team>:`` (a prefix of the
    keyword, read from its terms); team "" is the ids without ``:``."""
    clauses: list[dict[str, Any]] = [{"term": {"agent_id": agent_id}}, {"range": {"n": {"gt": 0}}}]
    if tool is not None:
        clauses.append({"term": {"tool": tool}})
    if user_id is not None:
        clauses.append({"term": {"user_id": user_id}})
    if team == "":
        return {"bool": {"filter": clauses, "must_not": [{"wildcard": {"user_id": {"value": "*:*"}}}]}}
    if team is not None:
        clauses.append({"prefix": {"user_id": f"{team}:"}})
    return {"bool": {"filter": clauses}}


def counters(hits: Sequence[dict[str, Any]]) -> list[Counter]:
    """The counters of the hits, summed over the users."""
    return summed([(s["tool"], s["kind"], s["key"], s["n"], s["first_us"], s["last_us"])
                   for s in (h["_source"] for h in hits)])
