"""Retrieval for what people say, not only for what they ask (issue 41), end to end with the local
embedder and the embedded store: a statement brings back what was said in other words; questions with
several parts are ranked part by part."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.errors import ModelError
from memoryscope_plugins.retrieval.pipeline import RetrievalRequest, floor_for, merge_rankings
from memoryscope_plugins.retrieval.ranking import demote_asking_lines
from memoryscope_plugins.settings import RetrievalSettings
from memoryscope_plugins.types import Memory, MemoryType, ScoredMemory

T0 = datetime(2024, 3, 1, 18, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=14)
# three sessions of small talk (Max's warm replies sit near anything said about one's life), then the
# session the later statement should bring back
SESSIONS = [
    [("Anna", "Hey Max! Long time no talk, how have you been?"),
     ("Max", "Hey Anna! Great to hear from you. I've been good, busy with work."),
     ("Anna", "Same here. I finally finished painting the living room last weekend."),
     ("Max", "That's great news, Anna! Love seeing your dedication to your home projects."),
     ("Anna", "Thanks! Next I want to plant tomatoes in the garden."),
     ("Max", "Wow, that sounds awesome! You always have such great ideas."),
     ("Anna", "My sister is visiting from Lisbon next month."),
     ("Max", "That's so exciting! I'm really happy for you, enjoy it!"),
     ("Anna", "We adopted a kitten called Miso in January."),
     ("Max", "Aww, that's amazing! Pets bring so much joy.")],
    [("Anna", "Hi Max! I just got back from a hiking trip in the Alps."),
     ("Max", "Amazing, Anna! That must have been such a great experience."),
     ("Anna", "It was beautiful. We walked for six hours on the second day."),
     ("Max", "Wow, you're so inspiring! Keep it up, I love hearing about your adventures."),
     ("Anna", "I also tried making ramen from scratch when I got home."),
     ("Max", "That's awesome! You're really good at trying new things."),
     ("Anna", "Miso knocked a plant off the shelf while I was away."),
     ("Max", "Haha, cats will be cats! Sounds like a fun little rascal."),
     ("Anna", "My book club is reading a mystery novel this month."),
     ("Max", "That sounds so fun! I'm so glad you have that community.")],
    [("Anna", "Hey Max, quick update from me: the garden is finally growing."),
     ("Max", "That's wonderful, Anna! Your hard work is really paying off."),
     ("Anna", "I picked the first tomatoes yesterday and made a salad."),
     ("Max", "Yum! That's so great, I'm happy for you."),
     ("Anna", "My sister loved Lisbon's food scene when she showed me around last year."),
     ("Max", "That's so sweet! Family trips are the best, aren't they?"),
     ("Anna", "Work has been calmer since we hired two new people."),
     ("Max", "Good to hear, Anna! That must be a relief, you deserve it.")],
    [("Anna", "After learning to say no to extra work, I've felt a lot less stressed overall."),
     ("Max", "That's a great skill to develop; protecting your time is important.")],
]
CUE = SESSIONS[-1][0][1]
STATEMENT = "I ended up volunteering for that project, and now I'm totally overwhelmed."


@pytest.fixture
def anna(engine):
    for number, turns in enumerate(SESSIONS):
        for i, (who, text) in enumerate(turns):
            engine.record("anna", [{"role": "user" if who == "Anna" else "assistant", "name": who, "content": text,
                                    "timestamp": T0 + timedelta(days=3 * number, minutes=i)}],
                          session_id=f"s{number}")
    return engine


def test_a_statement_brings_back_what_was_said_in_other_words(anna):
    # it shares no word with the cue; by cosine alone five lines of small talk come first (the cue is 0.29,
    # "I also tried making ramen..." 0.32). Measured: the cue first, 0.16 above the next; before issue 41 sixth.
    result = anna.retrieve("anna", STATEMENT, top_k=10, now=NOW)
    contents = [item.memory.content for item in result.memories]
    assert CUE in contents[:3], contents
    assert CUE in result.context


def test_a_question_naming_its_subject_still_goes_by_its_words(anna):
    result = anna.retrieve("anna", "When did Anna pick the first tomatoes?", top_k=3, now=NOW)
    assert result.memories[0].memory.content == "I picked the first tomatoes yesterday and made a salad."


def test_the_floor_is_the_calls_or_the_settings():
    cfg = RetrievalSettings()

    def request(min_relevance: float | None) -> RetrievalRequest:
        return RetrievalRequest(user_id="u", query="q", now=NOW, top_k=5, min_relevance=min_relevance)

    assert floor_for(request(None), cfg) == cfg.min_relevance == 0.1
    assert floor_for(request(0.3), cfg) == 0.3  # a call's own floor
    assert floor_for(request(-1), cfg) == -1


def test_a_stricter_floor_for_one_call_holds_for_a_statement_too(anna):
    loose = anna.retrieve("anna", STATEMENT, now=NOW).memories
    strict = anna.retrieve("anna", STATEMENT, now=NOW, min_relevance=0.3).memories
    assert len(strict) < len(loose)


class _FailingQueries:
    """The local embedder for documents; for queries, the error given."""

    def __init__(self, embedder, error: Exception) -> None:
        self._embedder, self._error = embedder, error
        self.name, self.dim = embedder.name, embedder.dim

    def embed(self, texts, *, kind="document"):
        if kind == "query":
            raise self._error
        return self._embedder.embed(texts, kind=kind)


def test_a_failing_query_embedding_leaves_the_full_text_channel(anna, caplog):
    anna.embedder = _FailingQueries(anna.embedder, ModelError("the embedding service is down"))
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins"):
        result = anna.retrieve("anna", "When did Anna pick the first tomatoes?", top_k=3, now=NOW)
    assert result.memories[0].memory.content == "I picked the first tomatoes yesterday and made a salad."
    assert "retrieving by full text only" in caplog.text and "tomatoes" not in caplog.text


def test_another_error_of_the_query_embedding_reaches_the_caller(anna):
    anna.embedder = _FailingQueries(anna.embedder, RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        anna.retrieve("anna", STATEMENT, now=NOW)


def test_only_the_query_is_embedded_and_each_part_is_searched_by_its_words(anna, monkeypatch):
    searches, embedded = [], []
    real_search, real_embed = anna.store.search, anna.embedder.embed
    monkeypatch.setattr(anna.store, "search", lambda request: searches.append(request) or real_search(request))
    monkeypatch.setattr(anna.embedder, "embed", lambda texts, kind="document": embedded.append(list(texts))
                        or real_embed(texts, kind=kind))
    question = "What do Anna and Max think about gardening?"
    result = anna.retrieve("anna", question, top_k=6, now=NOW)
    parts = ["What do Anna think about gardening?", "What do Max think about gardening?"]
    assert embedded == [[question]]  # a part narrows the words, not the meaning: no vector of its own
    assert [r.text for r in searches] == [question, *parts]
    assert searches[0].vector is not None and all(r.vector is None for r in searches[1:])
    from_parts = [item for item in result.memories if item.scores.get("part", 0) > 0]
    assert {item.scores["part"] for item in from_parts} == {1.0, 2.0}
    assert all("cosine" in item.scores for item in from_parts)  # scored with the whole query's meaning


def _scored(memory_id: str, score: float, content: str = "x") -> ScoredMemory:
    memory = Memory(id=memory_id, user_id="u", agent_id="a", content=content, type=MemoryType.TURN, created_at=T0)
    return ScoredMemory(memory=memory, score=score, scores={})


def test_merged_rankings_take_each_part_in_turn_each_memory_once():
    whole = [_scored("a", 3), _scored("b", 2), _scored("c", 1)]
    first = [_scored("b", 9), _scored("d", 8)]
    second = [_scored("e", 5), _scored("a", 4), _scored("f", 1)]
    merged = merge_rankings([whole, first, second])
    assert [item.memory.id for item in merged] == ["a", "b", "e", "d", "c", "f"]
    assert [item.scores["part"] for item in merged] == [0, 1, 2, 1, 0, 2]
    assert merge_rankings([whole]) is whole


def test_for_a_question_a_line_that_only_asks_gives_way_to_one_that_states():
    asking = _scored("q", 2.0, "What other hobbies do you have, Anna?")
    stating = _scored("s", 1.8, "I paint watercolours of the harbour on weekends.")
    ranked = demote_asking_lines([asking, stating], 0.8)
    assert [item.memory.id for item in ranked] == ["s", "q"] and asking.score == pytest.approx(1.6)
    assert demote_asking_lines([_scored("q", 2.0, "Why?")], 1.0)[0].score == 2.0


def test_the_pipeline_demotes_asking_lines_for_questions_only(anna):
    question = anna.retrieve("anna", "Where is Anna's sister visiting from?", now=NOW, top_k=50, min_relevance=-1)
    statement = anna.retrieve("anna", "My sister might visit again in the autumn.", now=NOW, top_k=50,
                              min_relevance=-1)
    asking = "Hey Max! Long time no talk, how have you been?"  # two words stated, then a question
    assert any(item.scores.get("asking") == 0.8 for item in question.memories if item.memory.content == asking)
    assert all("asking" not in item.scores for item in statement.memories)
