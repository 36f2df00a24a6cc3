"""The relevance floor (`retrieval.min_relevance`): unrelated queries get nothing, related ones are unaffected."""

from __future__ import annotations

import pytest

from memoryscope_plugins.errors import ValidationError

FACTS = ["My dog is called Biscuit.", "I live in Lisbon with my sister.", "I'm allergic to peanuts.",
         "I started learning the cello in May.", "My favourite food is ramen."]


@pytest.fixture
def filled(engine):
    for fact in FACTS:
        engine.record("anna", [{"role": "user", "content": fact}])
    return engine


def test_unrelated_queries_get_nothing_related_ones_keep_their_memories(filled):
    for small_talk in ("What is 2 + 2?", "ok"):
        assert filled.retrieve("anna", small_talk).memories == []
    assert filled.retrieve("anna", "hello", min_relevance=0.25).memories == []  # a stricter floor per call
    # indirect relevance survives the default floor: no shared word, similarity about 0.2
    assert FACTS[2] in [m.memory.content for m in filled.retrieve("anna", "What snack should I bring to the party?")
                        .memories]
    assert filled.retrieve("anna", "What is my dog's name?").memories[0].memory.content == FACTS[0]
    assert filled.retrieve("anna", "what instrument do I play").memories[0].memory.content == FACTS[3]


def test_floor_off_per_call_and_validated(filled):
    assert len(filled.retrieve("anna", "hello", min_relevance=-1).memories) == len(FACTS)
    with pytest.raises(ValidationError):
        filled.retrieve("anna", "hello", min_relevance=-2)
    with pytest.raises(ValidationError):
        filled.retrieve("anna", "hello", min_relevance="high")


def test_adapters_pass_their_floor(filled):
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig
    strict = MemoryBridge(filled, MemoryConfig(user_id="anna", min_relevance=0.99), "test")
    off = MemoryBridge(filled, MemoryConfig(user_id="anna", min_relevance=-1), "test")
    assert strict.retrieve("anna", "what instrument do I play").memories == []
    assert len(off.retrieve("anna", "hello").memories) == len(FACTS)
    with pytest.raises(ValueError):
        MemoryConfig(user_id="anna", min_relevance=-1.5)
