"""NameMatcher and normalise_name: English and Chinese names, case, possessives, overlaps, scale."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from memoryscope_plugins.person import NameMatcher, normalise_name
from memoryscope_plugins.person.matching import WORD_END, WORD_START, given_name, said_in, whole_words
from memoryscope_plugins.types import EntityKind
from tests.person.helpers import entity


def spans(matcher: NameMatcher, text: str) -> list[tuple[str, str]]:
    return [(found.name, text[found.start:found.end]) for found in matcher.find(text)]


@pytest.mark.parametrize(("raw", "folded"), [
    ("  St. Louis ", "st louis"), ("O'Brien", "o brien"), ("王 磊", "王磊"), ("ＭＥＬ", "mel"),
    ("New\t\nYork", "new york"), ("Straße", "strasse"), ("王磊·小明", "王磊小明"), ("...", ""), ("", ""),
    ("Figma 设计", "figma 设计"),
])
def test_normalise_name_folds_case_width_space_and_punctuation(raw, folded):
    assert normalise_name(raw) == folded


def test_normalise_name_rejects_a_non_str():
    with pytest.raises(TypeError):
        normalise_name(None)


def test_english_names_on_word_boundaries_with_possessives():
    matcher = NameMatcher([entity("mel", "Melanie", "Mel"), entity("ny", "New York", kind=EntityKind.PLACE)])
    text = "Mel's shop (Melanie's too) is in New York; Melody, Mel2, Mel-Anne and Mel_x are others."
    assert spans(matcher, text) == [("Mel", "Mel"), ("Melanie", "Melanie"), ("New York", "New York")]
    assert matcher.entities_in(text) == {"mel", "ny"}


def test_curly_possessive_and_names_at_the_edges():
    matcher = NameMatcher([entity("mel", "Mel")])
    assert spans(matcher, "Mel’s") == [("Mel", "Mel")]
    assert spans(matcher, "Mel") == [("Mel", "Mel")]
    assert spans(matcher, "Thanks, Mel!") == [("Mel", "Mel")]


def test_capitalised_names_that_are_common_words_match_only_as_names():
    matcher = NameMatcher([entity("w", "Will"), entity("m", "May"), entity("r", "Rose")])
    assert spans(matcher, "I will go in may, a rose for you") == []
    assert spans(matcher, "Will and May bought Rose a rose") == [("Will", "Will"), ("May", "May"), ("Rose", "Rose")]
    assert spans(matcher, "WILL is here") == [("Will", "WILL")]


def test_lower_case_names_match_in_any_case_and_multi_word_names_too():
    matcher = NameMatcher([entity("p", "pottery", kind=EntityKind.TOPIC), entity("ny", "New York")])
    assert spans(matcher, "Pottery class; POTTERY; pottery") == [("pottery", "Pottery"), ("pottery", "POTTERY"),
                                                                   ("pottery", "pottery")]
    assert spans(matcher, "i love new  york") == [("New York", "new  york")]
    assert spans(matcher, "New\nYork") == [("New York", "New\nYork")]


def test_chinese_names_by_substring_with_aliases():
    matcher = NameMatcher([entity("wl", "王磊", "小王"), entity("cd", "成都", kind=EntityKind.PLACE),
                           entity("sb", "星巴克", kind=EntityKind.ORGANIZATION)])
    text = "小王昨天在成都的星巴克见了王磊的朋友"
    assert spans(matcher, text) == [("小王", "小王"), ("成都", "成都"), ("星巴克", "星巴克"), ("王磊", "王磊")]
    assert matcher.entities_in(text) == {"wl", "cd", "sb"}


def test_mixed_text_latin_names_inside_chinese_and_chinese_inside_english():
    matcher = NameMatcher([entity("f", "Figma", kind=EntityKind.OBJECT), entity("cd", "成都"),
                           entity("mel", "Mel")])
    assert spans(matcher, "我用Figma做设计，Mel也去了成都") == [("Figma", "Figma"), ("Mel", "Mel"), ("成都", "成都")]
    assert spans(matcher, "Mel moved to 成都 last year") == [("Mel", "Mel"), ("成都", "成都")]


def test_longest_name_wins_and_a_name_is_not_counted_inside_a_longer_one():
    matcher = NameMatcher([entity("ny", "New York"), entity("nyu", "New York University"),
                           entity("wl", "王磊"), entity("wll", "王磊磊"), entity("york", "York")])
    assert spans(matcher, "She studied at New York University in New York.") == [
        ("New York University", "New York University"), ("New York", "New York")]
    assert spans(matcher, "王磊磊和王磊") == [("王磊磊", "王磊磊"), ("王磊", "王磊")]
    assert matcher.entities_in("New York University") == {"nyu"}


def test_overlapping_chinese_names_take_the_longest_then_the_earliest():
    matcher = NameMatcher([entity("a", "小王"), entity("b", "王磊"), entity("c", "上海"), entity("d", "海洋馆")])
    assert spans(matcher, "小王磊") == [("小王", "小王")]
    assert spans(matcher, "上海洋馆") == [("海洋馆", "海洋馆")]


def test_unusable_names_are_never_matched():
    matcher = NameMatcher([entity("one", "J"), entity("it", "it", kind=EntityKind.TOPIC), entity("we", "我们"),
                           entity("de", "的"), entity("long", "x" * 200), entity("blank", "  "),
                           entity("punct", "!!")])
    assert len(matcher) == 0
    assert matcher.find("J said it: 我们的 " + "x" * 200) == []


def test_a_shared_name_belongs_to_its_canonical_owner_then_the_most_mentioned():
    canonical = NameMatcher([entity("b", "Bob", "Mel"), entity("a", "Mel")])
    assert canonical.entities_in("Mel") == {"a"}
    frequent = NameMatcher([entity("a", "Amy", "Mel", count=1), entity("b", "Bea", "Mel", count=5)])
    assert frequent.entities_in("Mel") == {"b"}
    tied = NameMatcher([entity("z", "Zed", "Mel"), entity("b", "Bea", "Mel")])
    assert tied.entities_in("Mel") == {"b"}


def test_entity_for_looks_names_up_normalised():
    matcher = NameMatcher([entity("mel", "Melanie", "Mel"), entity("wl", "王磊", "小王")])
    assert matcher.entity_for("mel") == "mel"
    assert matcher.entity_for(" MELANIE ") == "mel"
    assert matcher.entity_for("王 磊") == "wl"
    assert matcher.entity_for("Bob") is None
    assert matcher.user_of("mel") == "u" and matcher.user_of("nobody") is None


def test_regex_metacharacters_in_names_are_literal():
    matcher = NameMatcher([entity("t", "AT&T", kind=EntityKind.ORGANIZATION), entity("d", "Dr. Who"),
                           entity("q", "(a|b)*", kind=EntityKind.TOPIC), entity("c", "C++", kind=EntityKind.TOPIC)])
    assert spans(matcher, "I call AT&T and watch Dr. Who, not ab") == [("AT&T", "AT&T"), ("Dr. Who", "Dr. Who")]
    assert spans(matcher, "C++ is compared as 'c': too short to be a name") == []
    assert spans(matcher, "literally (a|b)* here") == [("(a|b)*", "(a|b)*")]


def test_hostile_input_is_refused_clearly():
    with pytest.raises(TypeError):
        NameMatcher("Mel")
    with pytest.raises(TypeError):
        NameMatcher([object()])
    with pytest.raises(TypeError):
        NameMatcher(42)
    with pytest.raises(TypeError):
        NameMatcher([]).find(None)


def test_no_entities_finds_nothing_and_odd_text_is_safe():
    assert NameMatcher([]).find("Mel in 成都") == []
    matcher = NameMatcher([entity("mel", "Mel"), entity("cd", "成都")])
    assert matcher.find("") == []
    assert matcher.find("\x00Mel\udc80成都\u200b") != []
    assert len(matcher.find("Mel 成都 " * 20_000)) == 40_000


def test_hundreds_of_names_compile_once_and_all_match():
    people = [entity(f"p{i}", f"Person{i:03d} Smith") for i in range(300)]
    places = [entity(f"c{i}", f"城市{i:03d}号") for i in range(300)]
    matcher = NameMatcher(people + places)
    text = " ".join(f"Person{i:03d} Smith met me in 城市{i:03d}号." for i in range(0, 300, 7))
    assert matcher.entities_in(text) == {f"p{i}" for i in range(0, 300, 7)} | {f"c{i}" for i in range(0, 300, 7)}


NAMES = st.sampled_from(["Mel", "Melanie", "Mel Smith", "王磊", "小王", "王磊磊", "成都", "成都市", "New York",
                         "York", "pottery", "Will"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(names=st.lists(NAMES, min_size=1, max_size=8, unique=True),
       pieces=st.lists(st.one_of(NAMES, st.sampled_from([" ", "'s ", "的", ", ", "-", "x", "市", "\n"])), max_size=30))
def test_matches_never_overlap_are_ordered_and_spell_a_known_name(names, pieces):
    matcher = NameMatcher([entity(f"e{i}", name) for i, name in enumerate(names)])
    text = "".join(pieces)
    found = matcher.find(text)
    for first, second in zip(found, found[1:]):
        assert first.end <= second.start
    for match in found:
        assert 0 <= match.start < match.end <= len(text)
        assert normalise_name(text[match.start:match.end]) == normalise_name(match.name)
        assert match.name in names


def test_any_case_names_read_the_text_lowered_without_shifting_offsets():
    matcher = NameMatcher([entity("i", "istanbul", kind=EntityKind.TOPIC),
                           entity("x", "小米SU7", kind=EntityKind.OBJECT),
                           entity("p", "pottery", kind=EntityKind.TOPIC)])
    text = "İİ İSTANBUL, 我买了小米su7 and POTTERY"
    assert spans(matcher, text) == [("istanbul", "İSTANBUL"), ("小米SU7", "小米su7"), ("pottery", "POTTERY")]


@pytest.mark.parametrize(("name", "given"), [
    ("林晓雯", "晓雯"), ("欧阳娜娜", "娜娜"), ("林 晓雯", "晓雯"), ("张伟", None), ("王国庆", None), ("橘子猫", None),
    ("Mel", None), ("林晓雯Lin", None), ("", None), ("诸葛", None),
])
def test_the_given_name_of_a_chinese_full_name(name, given):
    assert given_name(name) == given


def test_a_chinese_full_name_is_found_by_its_given_name_alone():
    matcher = NameMatcher([entity("lxw", "林晓雯"), entity("hz", "杭州", kind=EntityKind.PLACE)])
    assert spans(matcher, "晓雯今天去杭州，林晓雯说的。") == [("晓雯", "晓雯"), ("杭州", "杭州"), ("林晓雯", "林晓雯")]
    assert matcher.entity_for("晓雯") == "lxw"


def test_a_given_name_is_nobodys_when_shared_and_loses_to_every_real_name():
    shared = NameMatcher([entity("lxw", "林晓雯"), entity("wxw", "王晓雯")])
    assert spans(shared, "晓雯来了") == [] and shared.entity_for("晓雯") is None
    named = NameMatcher([entity("lxw", "林晓雯"), entity("other", "晓雯", count=0)])
    assert named.entities_in("晓雯来了") == {"other"}
    alias = NameMatcher([entity("lxw", "林晓雯", count=9), entity("zx", "周雪", "晓雯")])
    assert alias.entities_in("晓雯来了") == {"zx"}


def test_only_a_person_is_found_by_a_given_name():
    matcher = NameMatcher([entity("shop", "林晓雯", kind=EntityKind.ORGANIZATION), entity("wgq", "王国庆")])
    assert spans(matcher, "晓雯说国庆去大理") == []


@pytest.mark.parametrize(("name", "text", "said"), [
    ("Figma", "我用Figma做设计", True),
    ("Figma", "我用 figma 做设计", True),
    ("New York", "moved to new\n york!", True),
    ("Mel", "Mel's shop", True),
    ("Mel", "Melody", False),
    ("Mel", "Mel-Anne", True),  # normalised: punctuation is a space, as the grounding check has always read it
    ("Mel", "Mel2", False),
    ("王磊", "我和王 磊去了", True),
    ("", "anything", False),
])
def test_said_in_reads_names_as_the_matcher_does(name, text, said):
    assert said_in(name, text) is said


def test_said_in_refuses_wrong_types():
    with pytest.raises(TypeError):
        said_in(None, "text")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Mel -'é我x1 .")), max_size=30),
       st.sampled_from(["Mel", "mel", "Mel-x", "我", "x1", "e"]))
def test_whole_words_finds_what_the_boundary_expression_finds(text, name):
    """`whole_words` is `WORD_START + name + WORD_END`, without compiling those classes per name."""
    expected = [m.span(1) for m in re.finditer(f"(?=({WORD_START}{re.escape(name)}{WORD_END}))", text,
                                               re.IGNORECASE)]
    assert list(whole_words(re.escape(name), text, re.IGNORECASE)) == expected
