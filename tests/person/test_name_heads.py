"""The proper name at the head of a phrase a model proposes ("Harry Potter fan" is Harry Potter)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from memoryscope_plugins.person.name_heads import named_head


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
