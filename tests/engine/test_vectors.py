"""The vectors memories are stored with (`memoryscope_plugins.vectors`): a short reply embedded with
the turn it answers, the recipe named in the vector space (issue 41)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.types import Memory, MemoryType
from memoryscope_plugins.vectors import (
    SHORT_TURN_WORDS,
    TURN_CONTEXT_SUFFIX,
    context_weight,
    document_vectors,
    vector_space,
    word_count,
)

WHEN = datetime(2024, 3, 9, 20, 15, tzinfo=timezone.utc)


def _turn(content: str, *, speaker: str = "Melanie", context: str | None = "Caroline: I got a new job!") -> Memory:
    return Memory(id=content[:8], user_id="u", agent_id="a", content=content, type=MemoryType.TURN,
                  created_at=WHEN, speaker=speaker, context=context)


class _Recorder:
    """A local stand-in that records what it is asked to embed (one call per `embed`)."""

    name = "recorder"
    dim = 3

    def __init__(self, turn_context: bool = True) -> None:
        self.turn_context = turn_context
        self.calls: list[list[str]] = []

    def embed(self, texts, *, kind="document"):
        self.calls.append(list(texts))
        rows = [[1.0, 0.0, 0.0] if "job" not in text else [0.0, 1.0, 0.0] for text in texts]
        return np.asarray(rows, dtype=np.float32)


def test_word_count_and_the_weight_of_the_context():
    assert word_count("That fosters great teamwork.") == 4
    assert word_count("我今天很累") == 2.5  # a CJK character is half a word
    assert context_weight(_turn("Congrats!")) == 1.0
    assert context_weight(_turn(" ".join(["word"] * SHORT_TURN_WORDS))) == 1.0
    assert context_weight(_turn(" ".join(["word"] * (SHORT_TURN_WORDS + SHORT_TURN_WORDS // 2)))) == 0.5
    assert context_weight(_turn(" ".join(["word"] * (2 * SHORT_TURN_WORDS)))) == 0.0
    assert context_weight(_turn("Congrats!", context=None)) == 0.0  # the first turn of a conversation
    # one person's facts said one after the other are not replies to each other
    assert context_weight(_turn("And I live in Lisbon.", context="Melanie: My dog is Biscuit.")) == 0.0


def test_a_short_reply_takes_the_turn_it_answers_in_one_call():
    embedder = _Recorder()
    reply, long_one = _turn("Congrats, that's wonderful!"), _turn(" ".join(["word"] * 20))
    vectors = document_vectors(embedder, [reply, long_one])
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 3  # two own texts, one context text
    assert embedder.calls[0][2] == "Caroline: I got a new job!\nCongrats, that's wonderful!"
    assert np.allclose(vectors[0], np.asarray([1, 1, 0]) / np.sqrt(2))  # the sum, normalised
    assert np.allclose(vectors[1], [1, 0, 0])  # a long turn keeps its own vector
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_an_embedder_without_turn_context_embeds_each_turn_alone():
    embedder = _Recorder(turn_context=False)
    vectors = document_vectors(embedder, [_turn("Congrats!")])
    assert embedder.calls == [["[9 March 2024] Melanie: Congrats!"]] and np.allclose(vectors[0], [1, 0, 0])
    assert vector_space(embedder) == "recorder" and vector_space(_Recorder()) == "recorder" + TURN_CONTEXT_SUFFIX


def test_the_local_multilingual_models_keep_their_own_words():
    from memoryscope_plugins.models.local_e5_onnx import E5OnnxEmbedder
    assert E5OnnxEmbedder.turn_context is False


def test_a_recorded_reply_sits_near_what_it_answers(engine):
    engine.record("anna", [{"role": "user", "name": "Anna", "content": "I finally adopted a rescue greyhound.",
                            "timestamp": WHEN},
                           {"role": "assistant", "name": "Max", "content": "That's lovely news!", "timestamp": WHEN}])
    (reply,) = [m for m in engine.list("anna") if m.content == "That's lovely news!"]
    stored = engine.store.vectors_of("anna", [reply.id])[reply.id]
    alone, dog = engine.embedder.embed(["[9 March 2024] Max: That's lovely news!", "a rescue greyhound"])
    # measured: 0.57 to the dog with its context, 0.09 alone
    assert float(stored @ dog) > float(alone @ dog) + 0.3
    assert reply.embedding_model == vector_space(engine.embedder)


def test_a_store_of_the_older_recipe_is_embedded_again_on_open(tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as memory:
        memory.record("anna", [{"role": "user", "content": "Hello there, I love hiking.", "timestamp": WHEN},
                               {"role": "assistant", "content": "Nice!", "timestamp": WHEN}])
        ids = [m.id for m in memory.list("anna")]
        memory.store.embedding_model = local_embedder.name  # as 0.1.0 named its vectors
        memory.store.set_vectors(ids, np.full((2, local_embedder.dim), 0.05, dtype=np.float32))
        assert {m.embedding_model for m in memory.list("anna")} == {local_embedder.name}
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as memory:  # re-embeds on open
        assert memory.store.count_needing_vectors() == 0
        assert {m.embedding_model for m in memory.list("anna")} == {vector_space(local_embedder)}
        stored = memory.store.vectors_of("anna", ids)
        assert all(abs(float(np.linalg.norm(v)) - 1.0) < 0.01 and not np.allclose(v, 0.05) for v in stored.values())


@pytest.mark.parametrize("bad", [None, 3])
def test_word_count_wants_text(bad):
    with pytest.raises(TypeError):
        word_count(bad)
