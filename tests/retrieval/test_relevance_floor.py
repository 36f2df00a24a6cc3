"""The relevance floor (`retrieval.min_relevance`): unrelated queries get nothing, related ones are unaffected."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.retrieval.noise_floor import calibrated
from memoryscope_plugins.retrieval.pipeline import noise_floors

FACTS = ["My dog is called Biscuit.", "I live in Lisbon with my sister.", "I'm allergic to peanuts.",
         "I started learning the cello in May.", "My favourite food is ramen."]
# memories are embedded dated ("[9 March 2024] user: ..."): a fixed date keeps every run's vectors the same
WHEN = datetime(2024, 3, 9, 20, 15, tzinfo=timezone.utc).isoformat()
DEFAULT_FLOOR = 0.1  # retrieval.min_relevance
# Margins below are calibrated relevance (0 = the query's noise floor, 1 = the same text), measured with
# the default (float32) embedder. A CPU moves them by about 1e-6; int8 compute on an AVX-512 VNNI CPU,
# by far the largest perturbation we know of, moved none by more than 0.03.
MARGIN = 0.04


@pytest.fixture
def filled(engine):
    for fact in FACTS:
        engine.record("anna", [{"role": "user", "content": fact, "timestamp": WHEN}])
    return engine


def _relevance(engine, query: str) -> dict[str, float]:
    """Each fact's calibrated relevance to `query`, as the floor reads it."""
    vector = engine.embedder.embed([query], kind="query")[0]
    floors = noise_floors(engine.embedder, "en", vector)
    assert isinstance(floors, dict)
    floor = floors["en"]
    found = engine.retrieve("anna", query, min_relevance=-1).memories
    return {m.memory.content: calibrated(m.scores["cosine"], floor) for m in found}


def test_unrelated_queries_get_nothing_related_ones_keep_their_memories(filled):
    # small talk: highest calibrated relevance 0.024 ("2 + 2") and 0.041 ("ok"; 0.069 against the embedder's
    # floor alone, and about 0.11 with int8 compute on a VNNI CPU, which let "My dog is called Biscuit." through)
    for small_talk in ("What is 2 + 2?", "ok"):
        highest = max(_relevance(filled, small_talk).values())
        assert highest < DEFAULT_FLOOR - MARGIN, (small_talk, highest)
        assert filled.retrieve("anna", small_talk).memories == []
    # a stricter floor per call: "hello" reaches 0.04
    assert max(_relevance(filled, "hello").values()) < 0.25 - MARGIN
    assert filled.retrieve("anna", "hello", min_relevance=0.25).memories == []
    # indirect relevance survives the default floor: no shared word, calibrated relevance 0.157
    snack = "What snack should I bring to the party?"
    assert _relevance(filled, snack)[FACTS[2]] > DEFAULT_FLOOR + MARGIN
    assert FACTS[2] in [m.memory.content for m in filled.retrieve("anna", snack).memories]
    # first by far: 0.36 and 0.26 for the right fact, at most 0.01 for any other
    for question, fact in (("What is my dog's name?", FACTS[0]), ("what instrument do I play", FACTS[3])):
        relevance = _relevance(filled, question)
        assert relevance[fact] > max(r for content, r in relevance.items() if content != fact) + 0.2, relevance
        assert filled.retrieve("anna", question).memories[0].memory.content == fact


def test_a_query_with_little_content_gets_a_higher_floor(local_embedder):
    from memoryscope_plugins.retrieval.noise_floor import noise_floor, query_floor
    model = noise_floor(local_embedder, "en")  # 0.056
    own = {query: query_floor(local_embedder, local_embedder.embed([query], kind="query")[0], "en")
           for query in ("ok", "hello", "what instrument do I play")}
    # measured: ok 0.084, hello 0.141, the question 0.000 (it then keeps the embedder's floor)
    assert own["ok"] > model + 0.02 and own["hello"] > model + 0.05, (model, own)
    assert own["what instrument do I play"] < model - 0.03, (model, own)


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


ZH_FACTS = ["我家的橘猫叫橘子，三岁了。", "我在杭州一家电商公司当设计师。", "我对花生过敏。", "上个月我开始学游泳了。"]


def test_chinese_small_talk_gets_nothing_with_the_english_model(engine):
    """MiniLM puts any two Chinese sentences near cosine 0.56: calibrated to that floor, small talk
    no longer passes on vectors, and one shared character (好, 天) is no shared word."""
    for fact in ZH_FACTS:
        engine.record("wen", [{"role": "user", "content": fact}])
    for small_talk in ("讲个笑话吧", "你好呀"):
        assert engine.retrieve("wen", small_talk).memories == [], small_talk
    assert len(engine.retrieve("wen", "讲个笑话吧", min_relevance=-1).memories) == len(ZH_FACTS)
    # a shared word still counts
    assert engine.retrieve("wen", "我的猫叫什么名字？").memories[0].memory.content == ZH_FACTS[0]
    assert engine.retrieve("wen", "我在哪个公司上班？").memories[0].memory.content == ZH_FACTS[1]


def _item(memory_id: str, content: str, **scores: float):
    from memoryscope_plugins.types import Memory, MemoryType, ScoredMemory
    return ScoredMemory(memory=Memory(id=memory_id, user_id="u", agent_id="a", content=content,
                                      type=MemoryType.TURN), score=1.0, scores=dict(scores))


def test_a_single_shared_cjk_character_is_not_a_shared_word():
    from memoryscope_plugins.retrieval.ranking import query_cjk_terms, relevant
    items = [_item("a", "今天好热。", bm25=1.2, cosine=0.0), _item("b", "我想吃火锅。", bm25=3.0, cosine=0.0),
             _item("c", "最近开始喝红酒了。", bm25=2.0, cosine=0.0)]
    assert [i.memory.id for i in relevant(items, 0.1, cjk_terms=query_cjk_terms("晚上吃火锅好不好？"))] == ["b"]
    # two shared characters make a word even when the words differ: 喝酒 / 喝红酒
    assert [i.memory.id for i in relevant(items, 0.1, cjk_terms=query_cjk_terms("我现在喝酒吗？"))] == ["c"]
    assert [i.memory.id for i in relevant(items, 0.1, cjk_terms=query_cjk_terms("热？"))] == ["a"]  # one character
    assert [i.memory.id for i in relevant(items, 0.1)] == ["a", "b", "c"]  # without CJK terms: BM25 alone
    assert query_cjk_terms("What is 2 + 2?") is None


def test_the_cosine_is_calibrated_to_the_noise_floor():
    from memoryscope_plugins.retrieval.ranking import relevant
    items = [_item("a", "x", cosine=0.60), _item("b", "y", cosine=0.70)]
    assert [i.memory.id for i in relevant(items, 0.1)] == ["a", "b"]  # raw cosines
    # a floor of 0.56: a -> 0.09, b -> 0.32
    assert [i.memory.id for i in relevant(items, 0.1, noise_floor=0.56)] == ["b"]


def test_noise_floor_is_per_language_and_never_breaks_a_query(engine, local_embedder, monkeypatch):
    from memoryscope_plugins.errors import ModelError
    from memoryscope_plugins.retrieval.noise_floor import noise_floor
    english, chinese = noise_floor(local_embedder, "en"), noise_floor(local_embedder, "zh")
    assert 0.0 <= english < 0.2 < 0.4 < chinese < 0.8
    engine.record("anna", [{"role": "user", "content": FACTS[0]}])
    question = "What is my dog's name?"
    query_vector = local_embedder.embed([question], kind="query")

    def flaky(texts, kind="document"):  # the query embeds, the floor's sentence pairs do not
        if kind == "query" and list(texts) == [question]:
            return query_vector
        raise ModelError("down")

    # a name the floor cache has not seen, so the floor is measured (and fails) in this call
    monkeypatch.setattr(local_embedder, "name", "an-embedder-whose-floor-cannot-be-measured")
    monkeypatch.setattr(local_embedder, "embed", flaky)
    assert engine.retrieve("anna", question).memories[0].memory.content == FACTS[0]


def test_a_floor_per_memory_language():
    from memoryscope_plugins.retrieval.ranking import relevant
    items = [_item("en", "I went hiking.", cosine=0.76), _item("zh", "我去爬山了。", cosine=0.76)]
    floors = {"en": 0.71, "zh": 0.82}  # a Chinese question: English memories sit lower
    assert [i.memory.id for i in relevant(items, 0.1, noise_floor=floors)] == ["en"]
