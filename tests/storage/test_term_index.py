"""The in-memory BM25 index of the embedded store, checked against BM25 computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memoryscope_plugins.storage.term_index import K1, B, TermIndex


def bm25(docs: list[list[str]], query: list[str]) -> list[float]:
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    out = []
    for doc in docs:
        score = 0.0
        for term in dict.fromkeys(query):
            tf = doc.count(term)
            if not tf:
                continue
            df = sum(1 for d in docs if term in d)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / avg))
        out.append(score)
    return out


DOCS = [["lisbon", "move", "may"], ["lisbon", "lisbon", "lisbon", "move"], ["cat", "tom"],
        ["weather", "nice", "lisbon"], ["coffee"] * 2 + ["morning"], []]


def test_scores_match_bm25_by_hand():
    index = TermIndex.build(DOCS)
    for query in (["lisbon"], ["lisbon", "move"], ["cat", "coffee", "zebra"], ["move", "move"]):
        assert index.scores(query) == pytest.approx(bm25(DOCS, query), rel=1e-5)


def test_unknown_terms_and_empty_index_score_zero():
    assert TermIndex.build(DOCS).scores(["zebra"]).tolist() == [0.0] * len(DOCS)
    assert len(TermIndex.build([]).scores(["lisbon"])) == 0


def test_extended_equals_a_fresh_build_and_leaves_the_original_alone():
    first = TermIndex.build(DOCS[:3])
    before = first.scores(["lisbon"]).copy()
    grown = first.extended(DOCS[3:])
    fresh = TermIndex.build(DOCS)
    for query in (["lisbon"], ["coffee", "cat"], ["move"]):
        assert grown.scores(query) == pytest.approx(fresh.scores(query))
    assert np.array_equal(first.scores(["lisbon"]), before)
    assert len(first) == 3 and len(grown) == len(DOCS)


def test_a_rare_term_outweighs_a_common_one():
    docs = [["coffee", "x"]] * 10 + [["violin", "x"]]
    scores = TermIndex.build(docs).scores(["coffee", "violin"])
    assert scores[-1] > scores[0] > 0
