"""The turns next to a retrieved turn, shown with it in the context.

A reply ("Yes, last Friday!") means little without the question it answers, and a question
("When did you go to the museum?") is answered by the turn after it. The store indexes a turn with
the turn it answers, so the next turn of a hit is usually among the search candidates already;
the turn before is one lookup by id. Neighbours only add lines to the context: the ranked
memories (what recall measures) stay as they are.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ..types import Memory, MemoryStatus, MemoryType, ScoredMemory
from .ranking import _same_content_key


class ShownMemories:
    """What a context already shows, by id and by content, so a line added to it is never a repeat."""

    def __init__(self, memories: Iterable[Memory]) -> None:
        self.ids: set[str] = set()
        self.keys: set[str] = set()
        for memory in memories:
            self.ids.add(memory.id)
            self.keys.add(_same_content_key(memory.content))

    def take_new(self, memories: Iterable[Memory], statuses: tuple[MemoryStatus, ...] | None,
                 limit: int | None = None) -> list[Memory]:
        """Copies of the memories not shown yet (and of an allowed status), in order, up to `limit`;
        they count as shown from then on."""
        out: list[Memory] = []
        for memory in memories:
            if limit is not None and len(out) >= limit:
                break
            key = _same_content_key(memory.content)
            if memory.id in self.ids or key in self.keys or (statuses is not None and memory.status not in statuses):
                continue
            self.ids.add(memory.id)
            self.keys.add(key)
            out.append(memory.copy())
        return out


def turn_neighbours(chosen: Sequence[ScoredMemory], candidates: Iterable[Memory],
                    fetch: Callable[[list[str]], list[Memory]], *, hits: int, after: bool = True,
                    statuses: tuple[MemoryStatus, ...] | None = (MemoryStatus.ACTIVE,)) -> list[Memory]:
    """The turn before (and, with `after`, the turn after) each of the best `hits` turns in
    `chosen`, leaving out memories already chosen or of the same content; `fetch(ids)` loads
    the turns before that are not among `candidates`."""
    if hits <= 0 or not chosen:
        return []
    shown = ShownMemories(item.memory for item in chosen)
    hit_turns = [item.memory for item in chosen if item.memory.type is MemoryType.TURN][:hits]
    if not hit_turns:
        return []
    pool = {memory.id: memory for memory in candidates}
    wanted_before = [m.previous_id for m in hit_turns if m.previous_id and m.previous_id not in shown.ids]
    missing = [memory_id for memory_id in dict.fromkeys(wanted_before) if memory_id not in pool]
    if missing:
        for memory in fetch(missing):
            pool[memory.id] = memory
    found: list[Memory] = [pool[memory_id] for memory_id in dict.fromkeys(wanted_before) if memory_id in pool]
    if after:
        hit_ids = {m.id for m in hit_turns}
        found += [m for m in pool.values() if m.previous_id in hit_ids and m.type is MemoryType.TURN]
    return shown.take_new(found, statuses)
