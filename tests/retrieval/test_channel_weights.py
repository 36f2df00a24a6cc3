"""Each query's channel weights (`retrieval.channel_weights`) and the vector side's hub correction
(`retrieval.hubness`): pure functions over settings and candidates."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memoryscope_plugins.retrieval.channel_weights import (
    TIME_ONLY_BOOST,
    best_text_match,
    query_evidence,
    weigh_channels,
)
from memoryscope_plugins.retrieval.hubness import MIN_NEIGHBOURHOOD, vector_scores
from memoryscope_plugins.retrieval.query_analysis import analyse_query
from memoryscope_plugins.settings import RetrievalSettings
from memoryscope_plugins.storage.base import Candidate
from memoryscope_plugins.types import Memory, MemoryType

CFG = RetrievalSettings()  # text_weight 1, text_evidence_full 0.5, neighbour 0.5, statements 0


def _memory(memory_id: str, content: str, speaker: str = "Caroline") -> Memory:
    return Memory(id=memory_id, user_id="u", agent_id="a", content=content, type=MemoryType.TURN,
                  created_at=datetime(2023, 5, 8, tzinfo=timezone.utc), speaker=speaker)


QUESTION = analyse_query("What did Caroline think of the pottery class?")
STATEMENT = analyse_query("I ended up volunteering for that project, and now I'm totally overwhelmed.")


@pytest.mark.parametrize(("evidence", "text_weight"), [
    (1.0, 1.0), (0.5, 1.0), (0.375, 0.5), (0.25, 0.0), (0.1, 0.0), (0.0, 0.0),
])
def test_the_text_channel_weighs_by_its_lexical_evidence(evidence, text_weight):
    # full weight from half the query's terms, none below a quarter, in proportion between
    assert weigh_channels(CFG, QUESTION, evidence).text_weight == pytest.approx(text_weight)


@pytest.mark.parametrize(("evidence", "text_weight"), [(1.0, 1.0), (0.75, 0.5), (0.5, 0.0), (0.3, 0.0)])
def test_a_statement_needs_twice_the_evidence(evidence, text_weight):
    assert weigh_channels(CFG, STATEMENT, evidence).text_weight == pytest.approx(text_weight)


def test_nothing_changes_for_a_question_with_evidence_or_when_the_rule_is_off():
    assert weigh_channels(CFG, QUESTION, 0.8) is CFG
    assert weigh_channels(CFG, QUESTION, None) is CFG  # CJK: no words to count
    off = CFG.model_copy(update={"text_evidence_full": 0.0})
    assert weigh_channels(off, QUESTION, 0.0) is off


def test_a_statements_turns_share_their_neighbours_score_less():
    assert weigh_channels(CFG, STATEMENT, 1.0).neighbour_weight == CFG.statement_neighbour_weight == 0.0
    assert weigh_channels(CFG, QUESTION, 1.0).neighbour_weight == CFG.neighbour_weight
    keep = CFG.model_copy(update={"statement_neighbour_weight": None})
    assert weigh_channels(keep, STATEMENT, 1.0).neighbour_weight == CFG.neighbour_weight
    # never more than the configured neighbour weight
    low = CFG.model_copy(update={"neighbour_weight": 0.1, "statement_neighbour_weight": 0.3})
    assert weigh_channels(low, STATEMENT, 1.0).neighbour_weight == 0.1


def test_a_query_about_a_time_alone_puts_that_time_first():
    time_only = analyse_query("what happened in March?")  # one word of its own: "happen"
    assert weigh_channels(CFG, time_only, 0.0, names_a_time=True).time_boost == TIME_ONLY_BOOST
    assert weigh_channels(CFG, time_only, 0.0, names_a_time=False).time_boost == CFG.time_boost
    topic = analyse_query("did I go to a museum in March?")
    assert weigh_channels(CFG, topic, 1.0, names_a_time=True).time_boost == CFG.time_boost
    chinese = analyse_query("三月发生了什么")  # no words to count: left as it is
    assert weigh_channels(CFG, chinese, None, names_a_time=True).time_boost == CFG.time_boost
    no_boost = CFG.model_copy(update={"time_boost": 0.0})
    assert weigh_channels(no_boost, time_only, 0.0, names_a_time=True).time_boost == 0.0


def test_query_evidence_reads_the_best_full_text_match_without_the_speakers():
    candidates = [
        Candidate(_memory("a", "I signed up for a pottery class yesterday."), text_rank=2, text_score=3.0),
        Candidate(_memory("b", "The pottery class was fun, Caroline thought."), text_rank=1, text_score=5.0),
        Candidate(_memory("c", "Nothing to do with it."), vector_rank=1, vector_score=0.4),
    ]
    assert best_text_match(candidates) is candidates[1]
    # terms: think, pottery, class (caroline is a speaker): the best match holds pottery and class
    evidence = query_evidence(QUESTION, candidates, speakers={"Caroline"})
    assert evidence == pytest.approx(2 / 3)
    assert query_evidence(QUESTION, [candidates[2]], speakers=()) == 0.0  # the text channel found nothing
    assert query_evidence(analyse_query("陶艺课怎么样"), candidates, speakers=()) is None


def _unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


def _axis(weights: dict[int, float], dim: int = 32) -> np.ndarray:
    vector = np.zeros(dim, dtype=np.float32)
    for axis, weight in weights.items():
        vector[axis] = weight
    return vector / np.linalg.norm(vector)


def test_a_hub_near_the_whole_neighbourhood_gives_way_to_a_memory_near_the_query():
    # axis 0: what the neighbourhood has in common; axis 1: what the query is about
    query = _axis({0: 0.6, 1: 0.8})
    hub = _axis({0: 1.0, 1: 0.3})  # near everything: cosine 0.80
    specific = _axis({0: 0.1, 1: 0.8, 2: 0.6})  # about the query, little of the rest: cosine 0.70
    others = [_axis({0: 1.0, 3 + i: 0.3}) for i in range(MIN_NEIGHBOURHOOD)]
    vectors = {"specific": specific, "hub": hub, **{f"o{i}": v for i, v in enumerate(others)}}
    candidates = [Candidate(_memory(mid, mid), vector_rank=rank, vector_score=float(v @ query))
                  for rank, (mid, v) in enumerate(vectors.items(), start=1)]
    cosines, scores = vector_scores(query, candidates, vectors, correction=0.7)
    assert cosines["hub"] > cosines["specific"] + 0.05  # by cosine the hub wins
    assert scores["specific"] > scores["hub"] + 0.3  # corrected, the memory near the query does
    assert cosines["hub"] == pytest.approx(float(hub @ query), abs=1e-6)
    plain_cosines, plain = vector_scores(query, candidates, vectors, correction=0.0)
    assert plain == plain_cosines == cosines


def test_few_candidates_a_full_text_hit_and_another_width():
    query = _unit([1.0, 0.0, 0.0])
    vectors = {"v": _unit([1.0, 1.0, 0.0]), "t": _unit([0.0, 1.0, 0.0]), "old": np.ones(5, dtype=np.float32)}
    candidates = [Candidate(_memory("v", "v"), vector_rank=1, vector_score=0.7),
                  Candidate(_memory("t", "t"), text_rank=1, text_score=2.0),  # found by full text only
                  Candidate(_memory("old", "old"), text_rank=2, text_score=1.0),
                  Candidate(_memory("none", "none"), text_rank=3, text_score=0.5)]
    cosines, scores = vector_scores(query, candidates, vectors, correction=0.7)
    # fewer than MIN_NEIGHBOURHOOD vector candidates: no correction; a full-text hit gets its cosine too;
    # a vector of another width (a model being replaced) and a memory without one get nothing
    assert scores == cosines and set(cosines) == {"v", "t"}
    assert cosines["t"] == pytest.approx(0.0, abs=1e-6)
    assert vector_scores(query, [], vectors, 0.7) == ({}, {})
