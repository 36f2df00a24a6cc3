"""The profile's rules: keys, evidence, history, user corrections, lines for the context block."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings, strategies as st

from memoryscope_plugins.person import (
    ProfileProposal,
    apply,
    current,
    history,
    is_multi_valued,
    normalise_key,
    profile_lines,
    retract,
    set_by_user,
)
from memoryscope_plugins.person.profile import names_its_key
from memoryscope_plugins.types import ProfileValue
from tests.person.helpers import T0


def at(days: float) -> datetime:
    return T0 + timedelta(days=days)


def said(key: str, value: str, days: float, source: str | None = None, language: str = "en") -> ProfileProposal:
    return ProfileProposal(key, value, source if source is not None else f"m{days:g}", at(days), language)


def run(existing: list[ProfileValue], *proposals: ProfileProposal) -> list[ProfileValue]:
    """Apply and merge the changes into the profile, as the store's upsert by id does."""
    changes = apply(existing, proposals, user_id="u", now=at(100))
    merged = {value.id: value for value in existing} | {value.id: value for value in changes}
    return list(merged.values())


@pytest.mark.parametrize(("key", "normalised"), [
    ("home", "home"), ("Lives in", "home"), ("住在", "home"), ("家", "home"), ("住址", "home"), ("我的住址", "home"),
    ("user_home", "home"), ("job", "work"), ("工作", "work"), ("职业", "work"), ("职位", "work"),
    ("Occupation", "work"), ("宠物", "pets"), ("pet", "pets"), ("饮食", "diet"), ("喜欢", "likes"),
    ("Favorite", "likes"), ("不喜欢", "dislikes"), ("家人", "family"), ("Kids", "family"), ("计划", "plans"),
    ("Favourite Band", "favourite_band"), ("  Car  Model! ", "car_model"), ("ＡＧＥ", "age"), ("年龄", "age"),
    ("老家", "hometown"), ("最喜欢的颜色", "最喜欢的颜色"),
])
def test_keys_are_lower_snake_with_synonyms_folded(key, normalised):
    assert normalise_key(key) == normalised


@pytest.mark.parametrize("bad", ["", "   ", "!!!", "x" * 200])
def test_empty_or_huge_keys_are_refused(bad):
    with pytest.raises(ValueError):
        normalise_key(bad)


def test_a_non_str_key_is_refused():
    with pytest.raises(TypeError):
        normalise_key(3)


@pytest.mark.parametrize(("key", "multi"), [
    ("home", False), ("work", False), ("diet", False), ("name", False), ("relationship", False),
    ("family", True), ("pets", True), ("likes", True), ("dislikes", True), ("plans", True), ("宠物", True),
    ("cars", True), ("car", False), ("address", False), ("status", False), ("最喜欢的颜色", False),
])
def test_single_and_multi_valued_keys(key, multi):
    assert is_multi_valued(key) is multi


def test_a_new_value_replaces_the_current_one_and_history_is_kept():
    profile = run([], said("home", "Leeds", 0))
    profile = run(profile, said("住址", "York", 10))
    leeds, york = history(profile, "home")
    assert (leeds.value, york.value) == ("Leeds", "York")
    assert leeds.valid_to == at(10) and leeds.superseded_by == york.id and not leeds.current
    assert york.current and york.valid_from == at(10) and york.source_ids == ["m10"]
    assert [value.value for value in current(profile)] == ["York"]


def test_a_repeated_value_adds_evidence_instead_of_a_copy():
    profile = run([], said("home", "Leeds", 0, "m1"))
    changes = apply(profile, [said("home", "leeds.", 5, "m2"), said("Lives in", "Leeds", 6, "m2")], user_id="u",
                    now=at(100))
    assert len(changes) == 1 and changes[0].id == profile[0].id
    assert changes[0].source_ids == ["m1", "m2"] and changes[0].value == "Leeds"
    assert apply(run(profile, *[said("home", "Leeds", 5, "m2")]), [said("home", "Leeds", 7, "m2")],
                 user_id="u", now=at(100)) == []


def test_a_value_coming_back_is_a_new_period():
    profile = run([], said("home", "Leeds", 0), said("home", "York", 10), said("home", "Leeds", 20))
    assert [(v.value, v.valid_from, v.valid_to) for v in history(profile, "home")] == [
        ("Leeds", at(0), at(10)), ("York", at(10), at(20)), ("Leeds", at(20), None)]


def test_multi_valued_keys_accumulate():
    profile = run([], said("pets", "a cat named Luna", 0), said("宠物", "a dog", 3), said("pet", "A cat named Luna", 4))
    assert sorted(v.value for v in current(profile)) == ["a cat named Luna", "a dog"]
    luna = next(v for v in profile if v.value == "a cat named Luna")
    assert luna.source_ids == ["m0", "m4"]


def test_an_older_statement_processed_late_becomes_history_not_current():
    profile = run([], said("home", "York", 10))
    profile = run(profile, said("home", "Leeds", 0), said("home", "Paris", 5))
    assert [(v.value, v.valid_from, v.valid_to) for v in history(profile, "home")] == [
        ("Leeds", at(0), at(5)), ("Paris", at(5), at(10)), ("York", at(10), None)]
    assert [v.value for v in current(profile)] == ["York"]


def test_proposals_in_one_call_are_taken_in_time_order():
    profile = run([], said("work", "nurse", 9), said("work", "student", 1))
    assert [v.value for v in current(profile)] == ["nurse"]
    assert [v.value for v in history(profile, "work")] == ["student", "nurse"]


def test_a_user_correction_wins_over_any_proposal_said_before_it():
    profile = run([], said("home", "Leeds", 0))
    edit = set_by_user(profile, "home", "York", at(10), user_id="u")
    profile = list(({v.id: v for v in profile} | {v.id: v for v in edit}).values())
    york = next(v for v in profile if v.value == "York")
    assert york.set_by == "user" and york.valid_from == at(10) and york.source_ids == []
    profile = run(profile, said("home", "Leeds", 2), said("home", "Paris", 9))  # said before the edit
    assert [v.value for v in current(profile)] == ["York"]
    assert {v.value for v in profile} == {"Leeds", "Paris", "York"}  # nothing lost
    profile = run(profile, said("home", "Berlin", 11))  # said after the edit
    berlin = current(profile)[0]
    assert berlin.value == "Berlin" and berlin.set_by == "model"
    ended = next(v for v in profile if v.id == york.id)
    assert ended.valid_to == at(11) and ended.superseded_by == berlin.id


def test_a_correction_made_before_the_latest_value_starts_still_becomes_current():
    profile = run([], said("home", "Leeds", 10))
    edit = set_by_user(profile, "home", "York", at(3), user_id="u")
    york = next(v for v in edit if v.value == "York")
    leeds = next(v for v in edit if v.value == "Leeds")
    assert york.current and york.valid_from == at(10)
    assert leeds.valid_to == at(10) and leeds.superseded_by == york.id


def test_set_by_user_confirms_a_current_value_and_ends_the_others():
    profile = run([], said("likes", "tea", 0), said("likes", "coffee", 1))
    edit = set_by_user(profile, "喜欢", "Tea", at(5), user_id="u")
    tea = next(v for v in edit if v.value == "tea")
    coffee = next(v for v in edit if v.value == "coffee")
    assert tea.set_by == "user" and tea.valid_from == at(0) and tea.current
    assert coffee.valid_to == at(5) and coffee.superseded_by == tea.id


def test_set_by_user_without_replace_adds_to_a_multi_valued_key_only():
    profile = run([], said("likes", "tea", 0), said("home", "Leeds", 0))
    added = set_by_user(profile, "likes", "hiking", at(5), replace=False, user_id="u")
    assert [(v.value, v.set_by) for v in added] == [("hiking", "user")]
    moved = set_by_user(profile, "home", "York", at(5), replace=False, user_id="u")
    assert {v.value: v.current for v in moved} == {"York": True, "Leeds": False}


@pytest.mark.parametrize("bad", ["", "   ", "x" * 500])
def test_set_by_user_refuses_empty_or_huge_values(bad):
    with pytest.raises(ValueError):
        set_by_user([], "home", bad, T0, user_id="u")


def test_retract_ends_a_value_and_keeps_it():
    profile = run([], said("pets", "a dog", 0))
    ended = retract(profile, profile[0].id, at(5), user_id="u")
    assert ended[0].valid_to == at(5) and ended[0].superseded_by is None and not ended[0].current
    assert retract(ended, profile[0].id, at(6), user_id="u") == []
    with pytest.raises(ValueError):
        retract(profile, "nope", at(5), user_id="u")


def test_a_retracted_value_said_again_before_its_end_adds_evidence_only():
    profile = run([], said("pets", "a dog", 0))
    profile = retract(profile, profile[0].id, at(5), user_id="u")
    again = apply(profile, [said("pets", "a dog", 3, "m9")], user_id="u", now=at(100))
    assert len(again) == 1 and again[0].source_ids == ["m0", "m9"] and not again[0].current
    later = apply(profile, [said("pets", "a dog", 8, "m10")], user_id="u", now=at(100))
    assert len(later) == 1 and later[0].current and later[0].id != profile[0].id


def test_invalid_proposals_are_skipped_and_nothing_else_changes():
    proposals = [said("", "x", 0), said("home", "   ", 1), said("home", "x" * 500, 2), said("!!", "Leeds", 3),
                 ProfileProposal("home", None, "m", at(4)),
                 ProfileProposal("home", "Leeds", None, at(5))]
    changes = apply([], proposals, user_id="u", now=at(100))
    assert [(v.key, v.value, v.source_ids) for v in changes] == [("home", "Leeds", [])]


@pytest.mark.parametrize(("key", "value"), [
    ("family", "family"), ("Family", "my family."), ("family members", "Family Members"), ("家人", "家人"),
    ("工作", "我的工作"), ("work", "工作"), ("user_home", "home"),
])
def test_a_value_that_only_names_its_key_is_skipped(key, value):
    """A 1.5B model wrote ``family: family`` for the line "Evan's family motivates her to stay healthy"."""
    assert names_its_key(key, value)
    assert apply([], [said(key, value, 1)], user_id="u", now=at(100)) == []


@pytest.mark.parametrize(("key", "value"), [
    ("relationship", "married"), ("school", "university"), ("family", "Sofia (daughter)"), ("home", "Lyon"),
    ("work", "在深圳工作"), ("likes", "family time"),
])
def test_a_value_that_is_another_word_of_its_key_is_kept(key, value):
    assert not names_its_key(key, value)
    assert [v.value for v in apply([], [said(key, value, 1)], user_id="u", now=at(100))] == [value]


def test_apply_validates_its_inputs():
    with pytest.raises(ValueError):
        apply([], [], user_id="")
    with pytest.raises(TypeError):
        apply([], [("home", "Leeds")], user_id="u")
    with pytest.raises(TypeError):
        apply([], [ProfileProposal("home", "Leeds", "m", "yesterday")], user_id="u")
    with pytest.raises(TypeError):
        apply("values", [], user_id="u")
    other = run([], said("home", "Leeds", 0))
    with pytest.raises(ValueError):
        apply(other, [], user_id="v")


def test_inputs_are_never_modified():
    profile = run([], said("home", "Leeds", 0))
    before = [(v.id, v.valid_to, list(v.source_ids)) for v in profile]
    apply(profile, [said("home", "York", 5), said("home", "Leeds", 1, "m7")], user_id="u", now=at(100))
    set_by_user(profile, "home", "Paris", at(9), user_id="u")
    assert [(v.id, v.valid_to, list(v.source_ids)) for v in profile] == before


def test_naive_times_are_utc():
    naive = ProfileProposal("home", "Leeds", "m", datetime(2026, 7, 1, 12))
    aware = run([], said("home", "York", 10))
    profile = run(aware, naive)
    assert [v.value for v in history(profile, "home")] == ["Leeds", "York"]


def test_profile_lines_in_english_and_chinese():
    profile = run([], said("home", "Leeds", 0), said("likes", "tea", 1), said("likes", "hiking", 2),
                  said("favourite band", "Muse", 3), said("name", "Ann", 4))
    assert profile_lines(profile, "en") == [
        "name: Ann (since 2026-07)", "home: Leeds (since 2026-07)", "likes: tea, hiking",
        "favourite band: Muse (since 2026-07)"]
    zh = run([], said("住址", "成都", 0, language="zh"), said("喜欢", "茶", 1, language="zh"),
             said("喜欢", "徒步", 2, language="zh"), said("最喜欢的颜色", "蓝色", 3, language="zh"))
    assert profile_lines(zh, "zh") == ["住址：成都（2026-07 起）", "喜欢：茶、徒步", "最喜欢的颜色：蓝色（2026-07 起）"]
    assert profile_lines(zh, "zh", limit=1) == ["住址：成都（2026-07 起）"]
    assert profile_lines([], "en") == []


def test_profile_lines_show_only_current_values():
    profile = run([], said("home", "Leeds", 0), said("home", "York", 40))
    assert profile_lines(profile) == ["home: York (since 2026-08)"]


def test_profile_lines_validation():
    with pytest.raises(ValueError):
        profile_lines([], "fr")
    with pytest.raises(ValueError):
        profile_lines([], "en", limit=-1)


KEYS = st.sampled_from(["home", "住址", "work", "pets", "likes", "cars", "car"])
VALUES = st.sampled_from(["Leeds", "leeds", "York", "成都", "a cat", "tea", ""])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(steps=st.lists(st.tuples(KEYS, VALUES, st.integers(0, 30), st.booleans()), max_size=15))
def test_no_value_is_ever_lost_and_single_keys_have_one_current_value(steps):
    profile: list[ProfileValue] = []
    proposed: set[tuple[str, str]] = set()
    for index, (key, value, day, by_user) in enumerate(steps):
        if by_user and value:
            changes = set_by_user(profile, key, value, at(day), user_id="u")
        else:
            changes = apply(profile, [said(key, value, day, f"s{index}")], user_id="u", now=at(100))
        merged = {v.id: v for v in profile} | {v.id: v for v in changes}
        assert set(merged) >= {v.id for v in profile}
        profile = list(merged.values())
        if value:
            proposed.add((normalise_key(key), value.casefold()))
    kept = {(v.key, v.value.casefold()) for v in profile}
    assert proposed <= kept
    for key in {v.key for v in profile}:
        now_true = [v for v in profile if v.key == key and v.current]
        if not is_multi_valued(key):
            assert len(now_true) <= 1
        assert len({v.value.casefold() for v in now_true}) == len(now_true)
        if not is_multi_valued(key):
            periods = sorted((v.valid_from, v.valid_to or at(10_000)) for v in profile if v.key == key)
            for (_, end), (start, _) in zip(periods, periods[1:]):
                assert end <= start
    for value in profile:
        if value.superseded_by is not None:
            assert value.superseded_by in {v.id for v in profile}
            assert value.valid_to is not None
