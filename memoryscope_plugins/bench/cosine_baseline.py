"""Plain cosine, the baseline `bench locomo --baseline cosine` puts beside the engine in the same run.

What a vector-only memory does: every recorded memory embedded as a document with the engine's
embedder, as the reference scripts and mem0's benchmark add a LoCoMo turn ("[8 May 2023] Caroline:
I went to ...", with the image caption the benchmark appends; no neighbouring turn), the question
embedded as a query, and all of the user's memories ranked by cosine alone. No full text, no fusion,
no floor, no time. It reads the memories the benchmark recorded and writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..engine import MemoryScope
from ..indexing import dated_text
from ..types import Memory


@dataclass
class CosineBaseline:
    """One user's memories embedded by their dated words; `rank` orders them for a query."""

    memories: list[Memory] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    @classmethod
    def of_user(cls, memory: MemoryScope, user_id: str, batch_size: int = 256) -> "CosineBaseline":
        """Every memory of `user_id` in `memory`'s store, embedded by `memory`'s embedder."""
        memories = [m for batch in memory.store.iter_memories(user_id, batch_size) for m in batch]
        if not memories:
            return cls()
        rows = [np.asarray(memory.embedder.embed([dated_text(m) for m in memories[i:i + batch_size]],
                                                 kind="document"), dtype=np.float32)
                for i in range(0, len(memories), batch_size)]
        return cls(memories, np.concatenate(rows))

    def rank(self, memory: MemoryScope, query: str, top_k: int) -> tuple[list[Memory], float]:
        """The `top_k` memories nearest `query` (ties by position) and the milliseconds it took,
        the query's embedding included."""
        start = time.perf_counter()
        if not self.memories:
            return [], 0.0
        vector = np.asarray(memory.embedder.embed([query], kind="query"), dtype=np.float32)[0]
        order = np.argsort(-(self.matrix @ vector), kind="stable")[:top_k]
        return [self.memories[int(i)] for i in order], (time.perf_counter() - start) * 1000.0
