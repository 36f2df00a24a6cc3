"""What the procedural part costs `retrieve` (issue 43): the same query on the same embedded store
with ``procedures.enabled`` off and on (200 turns of the user, 20 procedures of the agent), p50 of
`--calls` retrievals per case, each case run twice in turn (off, on, off, on).

    python bench/procedure_retrieval.py [--calls 40]

Prints one line per case: enabled, p50 ms, procedures returned.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryscope_plugins import Memory, MemoryScope, MemoryType, Settings  # noqa: E402
from memoryscope_plugins.procedures.scope import procedure_scope  # noqa: E402

AGENT = "concierge"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        memory = MemoryScope(Settings(store={"path": Path(folder) / "m.db"},
                                      consolidation={"worker": "none", "enabled": False}))
        try:
            memory.record("bob", [("user", f"message {i} about trains, tables and the spring weather")
                                  for i in range(200)], agent_id=AGENT)
            scope = procedure_scope("bob", AGENT)
            procedures = [Memory(id=f"p{i}", user_id=scope, agent_id=AGENT, type=MemoryType.PROCEDURE,
                                 content=f"When booking case {i}: call book_table with an ISO date (why: call {i} "
                                         "failed)", metadata={"tools": ["book_table"], "weight": 1.0})
                          for i in range(20)]
            memory.store.put(procedures, memory.embedder.embed([p.content for p in procedures], kind="document"))
            memory.warm_up()
            for enabled in (False, True, False, True):
                memory.settings.procedures.enabled = enabled
                times, found = [], 0
                for _ in range(args.calls):
                    start = time.perf_counter()
                    result = memory.retrieve("bob", "reserve a table for Tuesday", agent_id=AGENT, tools=["book_table"])
                    times.append((time.perf_counter() - start) * 1000)
                    found = len(result.procedures)
                print(f"procedures.enabled={enabled}: p50 {statistics.median(times):.2f} ms, {found} procedures")
        finally:
            memory.close()


if __name__ == "__main__":
    main()
