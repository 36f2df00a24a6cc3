"""What a query is, read without a model: its kind, its terms, its names and its parts (issue 41)."""

from __future__ import annotations

import pytest

from memoryscope_plugins.retrieval.query_analysis import (
    analyse_query,
    holds_question,
    lexical_evidence,
    mostly_asks,
    query_kind,
    query_terms,
)
from memoryscope_plugins.retrieval.query_parts import MAX_PARTS, query_parts


@pytest.mark.parametrize("query", [
    "What is Caroline's identity?", "when did she move to Boston", "Does Melanie have pets",
    "Is he still vegetarian?", "How many times has John been to Japan?",
    "I ended up volunteering again. Should I have said no?",  # a statement, then the question
    "她最近在忙什么", "你还记得我的猫叫什么吗", "用户现在住在哪里？", "他是不是换工作了",
])
def test_questions(query):
    assert query_kind(query) == "question" and analyse_query(query).asks


@pytest.mark.parametrize("query", [
    "Tell me about Mel's family", "Remind me what Anna likes.", "please list the books I read",
    "Recommend a restaurant for Friday", "请提醒我明天开会", "帮我记一下：周五交报告", "介绍一下小王",
])
def test_requests(query):
    assert query_kind(query) == "request" and analyse_query(query).asks


@pytest.mark.parametrize("query", [
    "I ended up volunteering for that project, and now I'm totally overwhelmed.",
    "My boss joked that I read the new policy like I was hunting for hidden traps.",
    "The weather is lovely today.", "ok", "Thanks!", "我今天很累。", "周末去爬山了，腿还在疼",
    "I wonder what she meant by that.",  # a wh-word inside a statement does not make a question
])
def test_statements(query):
    assert query_kind(query) == "statement" and not analyse_query(query).asks


def test_a_line_holds_a_question_when_any_of_its_sentences_is_one():
    assert holds_question("That's awesome, Evan! What made the biggest difference?")
    assert holds_question("你最近在忙什么？")
    assert not holds_question("I started painting a few years back. It's a great stress-buster!")
    assert not holds_question("")


def test_a_line_mostly_asks_when_it_states_little_besides_its_question():
    assert mostly_asks("What other hobbies do you have, Anna?")
    assert mostly_asks("That's awesome, Evan! What made the biggest difference?")
    assert not mostly_asks("I went to the LGBTQ support group yesterday and it was so powerful, the stories "
                           "really moved me and I cried. Have you ever been?")
    assert not mostly_asks("I paint watercolours of the harbour on weekends.")
    assert mostly_asks("Wow. Really?", stated_words=1) and not mostly_asks("Wow, so cool. Really?", stated_words=1)


def test_terms_are_the_full_text_channels_without_the_date_words_and_single_chinese_characters():
    # the index adds "[8 May 2023]" to every memory: month names and numbers are never evidence
    assert query_terms("What did Caroline do in May 2023?") == ("carolin",)
    assert query_terms("I went hiking with my sister") == ("went", "hike", "sister")
    assert set(query_terms("我的猫叫橘子")) == {"我的", "的猫", "猫叫", "叫橘", "橘子"}
    assert analyse_query("我的猫叫橘子").words is False and analyse_query("my cat").words is True


def test_lexical_evidence_is_the_share_of_the_query_terms_the_best_match_holds():
    terms = ("pottery", "class", "melani")
    assert lexical_evidence(terms, {"pottery", "class", "melani", "kid"}) == 1.0
    assert lexical_evidence(terms, {"class"}) == pytest.approx(1 / 3)
    # a speaker's name is in every one of their turns: it is left out of the share
    assert lexical_evidence(terms, {"melani"}, ignored={"melani"}) == 0.0
    assert lexical_evidence(terms, {"pottery"}, ignored={"melani"}) == 0.5
    assert lexical_evidence((), {"pottery"}) == 0.0


def test_two_joined_names_give_one_part_each():
    assert analyse_query("What do Evan and Sam do to relax?", ["Evan", "Sam"]).parts == (
        "What do Evan do to relax?", "What do Sam do to relax?")
    assert query_parts("Do both James and John have pets?", ["James", "John"]) == [
        "Do James have pets?", "Do John have pets?"]
    assert query_parts("When did James, Samantha and John go to the game?", ["James", "Samantha", "John"]) == [
        "When did James go to the game?", "When did Samantha go to the game?", "When did John go to the game?"]
    assert query_parts("小王和小李分别住在哪里？", ["小王", "小李"]) == ["小王住在哪里？", "小李住在哪里？"]


def test_one_name_or_names_not_joined_give_no_parts():
    assert query_parts("What does Evan do to relax?", ["Evan"]) == []
    assert query_parts("Did Evan tell Sam about the trip?", ["Evan", "Sam"]) == []  # not joined
    assert query_parts("What do Evan and his wife like?", ["Evan"]) == []  # "his wife" is no known name
    assert query_parts("Evan and Evan?", ["Evan"]) == []


def test_a_second_question_is_a_part_with_the_first_ones_words():
    parts = query_parts("When did Caroline go to the pride parade and what did she see there?", ["Caroline"])
    assert parts == ["When did Caroline go to the pride parade",
                     "Caroline go to the pride parade what did she see there?"]
    assert query_parts("他什么时候去的成都，以及在那里做了什么？")[0] == "他什么时候去的成都"
    # "..., and why?" asks the same search again with one word more: no parts
    assert query_parts("What charity might John work with and why?", ["John"]) == []
    # a statement asks nothing: it has no parts
    assert analyse_query("I went to the park and when I came back it rained.").parts == ()
    assert analyse_query("Evan and Sam went hiking.", ["Evan", "Sam"]).parts == ()


def test_no_query_gives_more_than_max_parts():
    names = ["Ann", "Ben", "Cal", "Dee", "Eve", "Fay"]
    assert len(query_parts("What do Ann, Ben, Cal, Dee, Eve and Fay like?", names)) == MAX_PARTS
