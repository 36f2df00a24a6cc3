"""The second hop: names in the best hits lead to the turns a multi-hop question needs, as extra
context lines only (the ranked memories stay as they are), for the same user only."""

from __future__ import annotations

import pytest

from memoryscope_plugins.retrieval.second_hop import hop_terms
from memoryscope_plugins.types import Memory
from tests.support.conversation import BOSTON, FILLER, NOW, NURSE, QUESTION, record_sessions


def _hop(engine, lines: int, hits: int = 3) -> None:
    engine.settings.retrieval = engine.settings.retrieval.model_copy(
        update={"context_hop": lines, "context_hop_hits": hits})


def _anna(engine, user: str = "caro", *, with_nurse: bool = True) -> None:
    sessions = [
        [("Caroline", BOSTON), ("Melanie", "Oh, that's a big change for her!")],
        [("Caroline", text) if i % 2 == 0 else ("Melanie", text) for i, text in enumerate(FILLER)],
    ]
    if with_nurse:
        sessions.append([("Melanie", "How are your friends doing?"), ("Caroline", NURSE)])
    record_sessions(engine, user, sessions)


def test_the_names_in_the_best_hits_bring_the_turn_a_multi_hop_question_needs(engine):
    _anna(engine)
    _hop(engine, 0)
    plain = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert plain.memories[0].memory.content == BOSTON
    assert NURSE not in plain.context and plain.second_hop == []  # the first hop alone misses it
    _hop(engine, 3)
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert [m.memory.id for m in result.memories] == [m.memory.id for m in plain.memories]  # ranking untouched
    assert [m.content for m in result.second_hop] == [NURSE]
    assert "[2023-05-28 Sun] Caroline: Anna works night shifts as a nurse" in result.context
    assert result.context.count("Anna works night shifts") == 1


def test_a_chinese_hit_leads_by_its_terms_to_the_turn_that_answers(engine):
    moved, job = "我的朋友阿杰搬到了上海。", "阿杰在一家银行当程序员，天天加班。"
    record_sessions(engine, "wei", [
        [("王伟", moved), ("小爱", "那离你挺远的。")],
        [("王伟", "今天下雨，我在家看书。"), ("小爱", "看书挺好的。"), ("王伟", "周末想去爬山。")],
        [("王伟", job), ("小爱", "程序员确实辛苦。")],
    ])
    query = "谁搬到了上海？"
    _hop(engine, 0)
    plain = engine.retrieve("wei", query, now=NOW, top_k=2, language="zh")
    # the line and the reply the index reads with it ("那离你挺远的。") are both hits
    assert moved in [m.memory.content for m in plain.memories] and job not in plain.context
    _hop(engine, 3)
    result = engine.retrieve("wei", query, now=NOW, top_k=2, language="zh")
    assert job in [m.content for m in result.second_hop] and job in result.context
    assert [m.memory.id for m in result.memories] == [m.memory.id for m in plain.memories]


def test_no_new_name_in_the_hits_adds_nothing(engine):
    record_sessions(engine, "mel", [[("Caroline", "I went hiking in the hills with Melanie yesterday."),
                             ("Melanie", "The hike was steep but the view was worth it.")],
                            [("Caroline", text) for text in FILLER]])
    _hop(engine, 0)
    plain = engine.retrieve("mel", "Where did Caroline go hiking?", now=NOW, top_k=2)
    _hop(engine, 3)
    result = engine.retrieve("mel", "Where did Caroline go hiking?", now=NOW, top_k=2)
    assert result.second_hop == [] and result.context == plain.context


def test_the_hop_never_crosses_users(engine):
    _anna(engine, "caro", with_nurse=False)
    _anna(engine, "other")  # another user holds the turn that would answer
    _hop(engine, 5)
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert result.memories[0].memory.content == BOSTON
    assert all(m.user_id == "caro" for m in [*result.second_hop, *result.neighbours])
    assert NURSE not in result.context


def test_the_hop_repeats_nothing_and_honours_the_type_filter(engine):
    _anna(engine)
    engine.add("caro", "Anna sends postcards from Boston every month.", type="observation")
    _hop(engine, 10)
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2, types=["turn"])
    shown = [m.memory.id for m in result.memories] + [m.id for m in result.neighbours] + \
        [m.id for m in result.second_hop]
    assert len(shown) == len(set(shown))
    assert all(m.type.value == "turn" for m in result.second_hop)
    assert "postcards" not in result.context


def _memory(text: str, speaker: str = "Caroline") -> Memory:
    return Memory(id=text[:8], user_id="u", agent_id="a", content=text, speaker=speaker)


@pytest.mark.parametrize("texts, query, expected", [
    (["Thanks! Anna moved to Boston with her sister Mia."], "Who moved to Boston?", ["Anna", "Mia"]),
    (["Great, I saw the Louvre in Paris on Saturday, Melanie!"], "What did Caroline see?", ["Louvre", "Paris"]),
    (["I love it. Thanks so much, Melanie."], "What does Caroline love?", []),  # speakers and openers only
])
def test_names_are_capitalised_words_that_are_not_openers_speakers_or_the_querys(texts, query, expected):
    got = hop_terms([_memory(t) for t in texts], query, speakers=["Caroline", "Melanie"],
                    ordinary_text=["thanks a lot", "great job", "i love it"])
    assert got == expected


def test_chinese_terms_leave_out_the_querys_and_the_speakers():
    got = hop_terms([_memory("我的朋友阿杰搬到了上海，林晓雯说。", "林晓雯")], "谁搬到了上海？", speakers=["林晓雯"])
    assert "阿杰" in got and "朋友" in got
    assert not {"上海", "搬到", "晓雯", "林晓"} & set(got)
