"""The proper name at the head of a phrase a model proposes ("Harry Potter fan" is Harry Potter)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from memoryscope_plugins.person.written_case import named_head, written_in_lower_case


@pytest.mark.parametrize(("proposed", "text", "head"), [
    ("Harry Potter fan", "I'm a big Harry Potter fan too!", "Harry Potter"),
    ("harry potter fan", "I'm a big Harry Potter fan too!", "Harry Potter"),  # the message's casing
    ("LGBTQ support group", "I went to an LGBTQ support group yesterday.", "LGBTQ"),
    ("LGBTQ+ pride parade", "At the LGBTQ+ pride parade, wow", "LGBTQ+"),
    ("Star Wars movies", "I love Star Wars movies", "Star Wars"),
    ("Nike shoes", "He got Nike shoes.", "Nike"),
    ("iPhone case", "iPhone case broke again", "iPhone"),  # a capital inside: a name even first
    ("Boston marathon", "I ran the Boston marathon in April", "Boston"),
    ("Minnesota Wolves fans", "so many Minnesota Wolves fans, right", "Minnesota Wolves"),
    ("Harry Potter fan", "Pottery class. Harry Potter fan-club? No: a Harry Potter fan!", "Harry Potter"),
])
def test_a_proper_name_with_common_nouns_after_it_is_cut_to_the_name(proposed, text, head):
    assert named_head(proposed, text) == head


@pytest.mark.parametrize(("proposed", "text"), [
    ("Star wars", "I love Star Wars movies"),  # written with capitals throughout
    ("The Lord of the rings", "Reading The Lord of the rings now"),  # a function word in the tail
    ("Game of Thrones", "Game of Thrones is great"),  # a capital after the lower-case word
    ("Pottery class", "Pottery class was fun."),  # capitalised only because it starts the sentence
    ("Nike shoes", "Nike shoes are cool"),
    ("Pottery class", "So good! Pottery class was fun."),
    ("mini 12", "my mini 12 broke"),  # no proper head
    ("New York", "in New York"),
    ("Harry Potter fan", "Harry Potter fanfic"),  # not said as proposed: left to the grounding check
    ("Mary Ann smith", "Mary Ann smith"),  # a name given alone (a speaker's) is given as it is
    ("Nike", "He got Nike shoes."),
    ("林晓雯 fan", "林晓雯 fan"),
    ("成都 trip", "我的成都 trip"),  # Chinese has no case
])
def test_other_phrases_stay_whole(proposed, text):
    assert named_head(proposed, text) == proposed


def test_named_head_refuses_wrong_types():
    with pytest.raises(TypeError):
        named_head(None, "text")
    with pytest.raises(TypeError):
        named_head("Nike shoes", b"Nike shoes")


@given(st.text(max_size=40), st.text(max_size=120))
def test_the_head_is_the_name_or_words_the_text_writes(proposed, text):
    head = named_head(proposed, text)
    assert head == proposed or (head and head in text and len(head.split()) < len(proposed.split()))


@pytest.mark.parametrize(("proposed", "text"), [
    ("Adoption agencies", "Researching adoption agencies now, I'm excited."),
    ("School event", "Went to a school event. It was fun"),
    ("Friends and mentors", "Thanks to my friends and mentors, Mel!"),
    ("Pottery", "I've loved pottery since May and pottery is calm"),
])
def test_a_models_capitals_on_what_the_message_writes_in_lower_case_are_the_models(proposed, text):
    assert written_in_lower_case(proposed, text)


@pytest.mark.parametrize(("proposed", "text"), [
    ("Paris", "i went to paris last week"),  # no capital at all: the writer does not use case
    ("Paris", "I went to paris, I'm back"),  # the pronoun I says nothing about the writer either
    ("Adoption agencies", "I'm looking into adoption agencies now."),
    ("Pottery", "Pottery is calm, I love pottery"),  # written with a capital once
    ("Mini 12", "My mini 12 broke"),  # a digit is a name's mark however it is cased
    ("Duolingo", "我最近开始在Duolingo上学日语了"),
    ("duolingo", "我最近开始在Duolingo上学日语了"),
    ("成都", "我在成都"),  # Chinese has no case
    ("Paris", "Lyon, not here"),  # not said: the grounding check's to refuse
    ("", "Anything"),
])
def test_names_the_message_writes_as_names_or_without_any_case_are_not_the_models(proposed, text):
    assert not written_in_lower_case(proposed, text)


def test_a_latin_phrase_inside_chinese_text_is_read_between_the_cjk_characters():
    assert named_head("Harry Potter fan", "我是Harry Potter fan哦") == "Harry Potter"
    assert written_in_lower_case("Adoption agencies", "Yes, 领养adoption agencies吧")


def test_written_in_lower_case_refuses_wrong_types():
    with pytest.raises(TypeError):
        written_in_lower_case(["Paris"], "paris")
