"""What the run-outcome tests of every adapter share (issue 43): an engine with procedures on (and
no model: a finished run is only queued), an agent procedure the adapter's retrieval finds for the
scenario's request, and the run markers the adapter's `record` calls left.

The procedure is written with the store's own `put`, as learning writes one: these tests check what
the adapter passes (`run_outcome`, `procedures_used`), not how procedures are learnt
(tests/procedures does that with a fake model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryscope_plugins import Memory, MemoryScope, MemoryType, Settings
from memoryscope_plugins.consolidation.steps import embed_text
from memoryscope_plugins.procedures.scope import RunMarker, parse_marker, procedure_scope

PROCEDURE = "When booking a table at a restaurant and asked about the weather: call weather, then book_table"


def procedures_engine(path: Path, embedder: Any) -> MemoryScope:
    """An engine with ``procedures.enabled`` and no model: a run `record` ends is queued, never learnt."""
    return MemoryScope(Settings(store={"path": path}, procedures={"enabled": True},
                                consolidation={"worker": "none"}), embedder=embedder)


def seed_procedure(engine: MemoryScope, user_id: str, agent_id: str) -> str:
    """Store one procedure of `agent_id` (for `user_id`'s team) about the scenario's tools; its id."""
    scope = procedure_scope(user_id, agent_id)
    memory = Memory(id=f"proc-{agent_id}", user_id=scope, agent_id=agent_id, content=PROCEDURE,
                    type=MemoryType.PROCEDURE,
                    metadata={"when": "booking a table", "do": "call weather, then book_table", "why": "",
                              "tools": ["book_table", "weather"], "runs": 1, "uses": 0, "successes": 0,
                              "failures": 0, "weight": 1.0, "origin": "procedure"})
    engine.store.put([memory], engine.embedder.embed([embed_text(memory, engine.embedder)]))
    return memory.id


def seed_two_agents(engine: MemoryScope, user_id: str, agent_id: str) -> str:
    """Store a procedure of `agent_id` and one of ``"assistant"`` (the agent whose procedures a retrieval
    with no agent id returns) on the same task; the id of `agent_id`'s."""
    seed_procedure(engine, user_id, "assistant")
    return seed_procedure(engine, user_id, agent_id)


def markers(engine: MemoryScope, user_id: str, agent_id: str) -> list[RunMarker]:
    """The runs `record` ended for the user with the agent, oldest first."""
    logged = engine.store.recent_messages(procedure_scope(user_id, agent_id), agent_id, None, 100)
    found = [parse_marker(m.message.content) for m in logged]
    return [m for m in found if m is not None and m.user_id == user_id]


def outcomes(engine: MemoryScope, user_id: str, agent_id: str) -> list[tuple[str, list[str]]]:
    """(outcome, procedures used) of each run the adapter ended, oldest first."""
    return [(m.outcome, m.used) for m in markers(engine, user_id, agent_id)]
