"""How an adapter ends the run of a turn: the outcome it passes to `MemoryScope.record`.

Every adapter ends a run with each turn it records (``run_outcome``), taking the outcome only from
what the framework said about that turn, never from the model's words:

- ``"failed"``: the framework raised out of the turn (the adapter then records the turn's tool calls
  it saw, and lets the exception through), or the last call of some tool in the turn failed (an
  error the agent did not recover from by calling that tool again with success), or, where the
  framework hands the adapter the model's finish reason (ag2), the answer was cut off (`CUT_OFF`).
- ``"succeeded"``: the turn ended normally, it called at least one tool, and the last call of every
  tool it called succeeded.
- ``"unknown"``: the turn ended normally without a tool call (a reply alone says nothing of whether
  the task was done), or the last call of one of its tools has no outcome seen (status ``unknown``)
  and no tool's last call failed.

A turn that has not ended (paused on a client-side tool or on a human's approval) ends no run.

With ``procedures.enabled`` off (the default) the engine checks the outcome and does nothing else
with it: nothing is queued, nothing is written. With it on, the run is queued for learning and the
outcome is counted on the procedures the adapter's own retrieval returned for the turn
(`procedure_ids`), passed as ``procedures_used``.

This module imports no agent framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from memoryscope_plugins.procedures.scope import MAX_USED
from memoryscope_plugins.types import RetrievalResult

Outcome = Literal["succeeded", "failed", "unknown"]
#: a model API's finish reasons saying the answer was cut off: the turn ended without a whole answer
CUT_OFF = ("length", "content_filter")


def turn_outcome(tool_messages: Sequence[Mapping[str, Any]], *, failed: bool = False) -> Outcome:
    """The outcome of a turn that ended (see the module docstring): `failed` when the framework
    said the turn failed, else from the last call of each tool among `tool_messages` (the
    messages of `MemoryBridge.tool_messages`)."""
    if failed:
        return "failed"
    last: dict[str, str] = {}
    for message in tool_messages:
        call = message.get("tool_call")
        if isinstance(call, Mapping):
            last[str(call.get("name"))] = str(call.get("status"))
    if not last or "error" in last.values():
        return "failed" if last else "unknown"
    return "succeeded" if all(status == "ok" for status in last.values()) else "unknown"


def procedure_ids(results: Iterable[RetrievalResult]) -> list[str]:
    """The ids of the procedures the turn's retrievals returned (first seen first, at most the
    engine's `MAX_USED`): the ``procedures_used`` of the run."""
    ids: dict[str, None] = {}
    for result in results:
        for scored in result.procedures:
            ids.setdefault(scored.memory.id, None)
    return list(ids)[:MAX_USED]


__all__ = ["CUT_OFF", "Outcome", "procedure_ids", "turn_outcome"]
