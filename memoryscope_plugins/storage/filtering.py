"""What a `MemoryFilter` lets through, stated once in Python.

Every backend translates these rules into its engine's query (SQL, a numpy mask, an Elasticsearch
bool query); the store contract suite (tests/store_contract.py) checks each translation against
`matches` over many memories and filters. Change the rules here and in every translation.
"""

from __future__ import annotations

from ..types import Memory, TimeRange, as_aware
from .base import MemoryFilter


def matches(memory: Memory, flt: MemoryFilter) -> bool:
    """True when `flt` lets `memory` through (the user is checked by the caller).

    - ``agent_id`` / ``session_id``: equal, when given;
    - ``types`` / ``statuses``: one of them, when given and not empty (empty means no constraint);
    - ``time_range``: see `in_time_range`.
    """
    if flt.agent_id is not None and memory.agent_id != flt.agent_id:
        return False
    if flt.session_id is not None and memory.session_id != flt.session_id:
        return False
    if flt.types and memory.type not in flt.types:
        return False
    if flt.statuses and memory.status not in flt.statuses:
        return False
    return flt.time_range is None or in_time_range(memory, flt.time_range)


def in_time_range(memory: Memory, window: TimeRange) -> bool:
    """The range is half-open, [start, end), either end open when None. A memory is in it when its
    message time is, or when its event (start to end, or the start alone) overlaps it: the event
    starts before the end and ends (inclusive) at or after the start."""
    lo = None if window.start is None else as_aware(window.start)
    hi = None if window.end is None else as_aware(window.end)
    created = as_aware(memory.created_at)
    if (lo is None or created >= lo) and (hi is None or created < hi):
        return True
    if memory.event_start is None:
        return False
    start = as_aware(memory.event_start)
    last = start if memory.event_end is None else as_aware(memory.event_end)
    return (hi is None or start < hi) and (lo is None or last >= lo)
