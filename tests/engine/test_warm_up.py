"""Issue 29, item 8: the first `retrieve` of a process measured the embedder's noise floors (a few batches
of fixed texts, 150-300 ms of "ranking" with the local model). `warm_up` does that work at start (`serve`
calls it), with the same values, so the first retrieval ranks exactly as it would have."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Sequence

import numpy as np

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.errors import ModelError

FACTS = ["Anna moved to Lisbon last May.", "Anna surfs on weekends.", "Anna's sister Clara visits in June.",
         "Anna is allergic to peanuts.", "Anna started a pottery class."]


class CountingEmbedder:
    """Deterministic word-hash vectors under a name no other test uses (the floors are cached per name)."""

    dim = 32
    multilingual = False

    def __init__(self, fail: bool = False) -> None:
        self.name = f"counting-{uuid.uuid4().hex}"
        self.calls: list[tuple[str, int]] = []
        self.fail = fail

    def embed(self, texts: Sequence[str], *, kind: str = "document") -> np.ndarray:
        if self.fail:
            raise ModelError("the embedding service is down")
        self.calls.append((kind, len(texts)))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in text.lower().split():
                row[hashlib.sha256(word.encode()).digest()[0] % self.dim] += 1.0
            row /= max(float(np.linalg.norm(row)), 1e-9)
        return rows

    async def aembed(self, texts: Sequence[str], *, kind: str = "document") -> np.ndarray:
        return self.embed(texts, kind=kind)


def engine(tmp_path, embedder: CountingEmbedder) -> MemoryScope:
    folder = tmp_path / embedder.name
    folder.mkdir()
    scope = MemoryScope(Settings(store={"path": folder / "memory.db"}, consolidation={"worker": "none"}),
                        embedder=embedder, start_worker=False)
    for fact in FACTS:
        scope.add("anna", fact, created_at="2026-06-01T10:00:00+00:00")
    embedder.calls.clear()
    return scope



def test_after_warm_up_the_first_retrieval_only_embeds_its_query(tmp_path):
    embedder = CountingEmbedder()
    scope = engine(tmp_path, embedder)
    try:
        scope.warm_up()
        assert len(embedder.calls) > 2  # the floors were measured now
        embedder.calls.clear()
        scope.retrieve("anna", "Where does Anna live?", now="2026-07-01T00:00:00+00:00")
        assert embedder.calls == [("query", 1)]
    finally:
        scope.close()


def test_a_cold_first_retrieval_measures_the_floors_and_ranks_the_same(tmp_path):
    warm, cold = CountingEmbedder(), CountingEmbedder()
    warm_scope, cold_scope = engine(tmp_path, warm), engine(tmp_path, cold)
    try:
        warm_scope.warm_up()
        warm.calls.clear()
        query = "Where does Anna live and what does she do on weekends?"
        warm_result = warm_scope.retrieve("anna", query, now="2026-07-01T00:00:00+00:00")
        cold_result = cold_scope.retrieve("anna", query, now="2026-07-01T00:00:00+00:00")
        assert len(cold.calls) > len(warm.calls) == 1  # without warm_up the first retrieval does the work
        assert [m.memory.content for m in warm_result.memories] == [m.memory.content for m in cold_result.memories]
        assert [m.score for m in warm_result.memories] == [m.score for m in cold_result.memories]
        assert warm_result.memories
    finally:
        warm_scope.close()
        cold_scope.close()


def test_warm_up_has_an_async_twin_and_survives_a_model_error(tmp_path):
    embedder = CountingEmbedder()
    scope = engine(tmp_path, embedder)
    try:
        asyncio.run(scope.awarm_up())
        embedder.calls.clear()
        scope.retrieve("anna", "pottery?")
        assert embedder.calls == [("query", 1)]
    finally:
        scope.close()
    broken = CountingEmbedder(fail=True)
    folder = tmp_path / "broken"
    folder.mkdir()
    scope = MemoryScope(Settings(store={"path": folder / "memory.db"}, consolidation={"worker": "none"}),
                        embedder=broken, start_worker=False)
    try:
        scope.warm_up()  # logged, not raised: the first retrieval will try again
        assert scope.retrieve("anna", "anything?").memories == []  # by full text, as without a warm-up
    finally:
        scope.close()
