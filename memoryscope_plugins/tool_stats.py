"""The tool statistics an agent's logged calls add up to (`MemoryScope.tool_stats`), folded from
the store's counters (`storage.tool_counters`); no model, no guess: every figure is a count of
recorded calls, and the latency percentiles are exact to their bucket (`tool_calls.GROWTH`)."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Sequence

from .storage.tool_counters import CALL, ERROR, FAIL, LATENCY, SHAPE_FAIL, SHAPE_OK, UNKNOWN, Counter
from .tool_calls import bucket_bound
from .types import ToolStats

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def fold(agent_id: str, counters: Sequence[Counter], top: int) -> list[ToolStats]:
    """One `ToolStats` per tool of the counters (tools by name), with the `top` most frequent
    errors and argument shapes (ties by text)."""
    by_tool: dict[str, list[Counter]] = defaultdict(list)
    for counter in counters:
        by_tool[counter.tool].append(counter)
    return [_stats(agent_id, tool, by_tool[tool], top) for tool in sorted(by_tool)]


def _stats(agent_id: str, tool: str, counters: Sequence[Counter], top: int) -> ToolStats:
    calls = failures = unknown = 0
    first = last = None
    errors: list[tuple[str, int]] = []
    latency: list[tuple[int, int]] = []
    shapes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in counters:
        if c.kind == CALL:
            calls, first, last = c.n, _time(c.first_us), _time(c.last_us)
        elif c.kind == FAIL:
            failures = c.n
        elif c.kind == UNKNOWN:
            unknown = c.n
        elif c.kind == ERROR:
            errors.append((c.key, c.n))
        elif c.kind == LATENCY:
            latency.append((int(c.key), c.n))
        elif c.kind in (SHAPE_OK, SHAPE_FAIL):
            shapes[c.key][c.kind == SHAPE_FAIL] += c.n
    errors.sort(key=lambda item: (-item[1], item[0]))
    ranked = sorted(((shape, ok, bad) for shape, (ok, bad) in shapes.items()), key=lambda s: (-(s[1] + s[2]), s[0]))
    latency.sort()
    timed = sum(n for _, n in latency)
    return ToolStats(agent_id=agent_id, tool=tool, calls=calls, failures=failures, errors=errors[:top],
                     error_kinds=len(errors), timed_calls=timed, p50_ms=percentile(latency, 0.50),
                     p95_ms=percentile(latency, 0.95), shapes=ranked[:top], shape_kinds=len(ranked),
                     first_used=first, last_used=last, unknown=unknown)


def percentile(buckets: Sequence[tuple[int, int]], q: float) -> float | None:
    """The nearest-rank `q` percentile of (bucket, count) pairs in bucket order, as its bucket's
    upper bound (None: no count)."""
    total = sum(n for _, n in buckets)
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for bucket, n in buckets:
        seen += n
        if seen >= rank:
            return bucket_bound(bucket)
    raise AssertionError("unreachable: the ranks add up to the total")


def _time(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)
