"""The profile through the engine: the user's corrections, removal that keeps history, keys in English
and Chinese, errors. Real SQLite store and the real local embedder."""

from __future__ import annotations

import asyncio

import pytest

from memoryscope_plugins import NotFoundError, ProfileValue, ValidationError
from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.types import utc_now


def test_set_replaces_a_single_valued_key_and_keeps_history(engine):
    first = engine.set_profile("anna", "住址", "成都")
    assert (first.key, first.value, first.set_by, first.current) == ("home", "成都", "user", True)
    second = engine.set_profile("anna", "lives in", "Leeds")
    assert {key: [v.value for v in values] for key, values in engine.profile("anna").items()} == {"home": ["Leeds"]}
    history = engine.profile_history("anna", "home")
    assert [v.value for v in history] == ["成都", "Leeds"]
    assert history[0].superseded_by == second.id and history[0].valid_to is not None
    assert engine.profile_history("anna", "住址") == history  # the key is normalised


def test_multi_valued_keys_accumulate_without_replace(engine):
    engine.set_profile("anna", "likes", "tea", replace=False)
    engine.set_profile("anna", "喜欢", "hiking", replace=False)
    engine.set_profile("anna", "work", "nurse", replace=False)  # single-valued: replaces anyway
    engine.set_profile("anna", "work", "doctor", replace=False)
    profile = engine.profile("anna")
    assert [v.value for v in profile["likes"]] == ["tea", "hiking"]
    assert [v.value for v in profile["work"]] == ["doctor"]
    engine.set_profile("anna", "likes", "coffee")  # replace=True: the other likes end
    assert [v.value for v in engine.profile("anna")["likes"]] == ["coffee"]
    assert len(engine.profile_history("anna", "likes")) == 3


def test_setting_the_current_value_again_keeps_it(engine):
    first = engine.set_profile("anna", "home", "Porto")
    again = engine.set_profile("anna", "home", "porto.")
    assert again.id == first.id
    assert len(engine.profile_history("anna", "home")) == 1


def test_a_correction_wins_over_the_model(engine):
    model_value = ProfileValue(id="v-model", user_id="anna", key="home", value="Lisbon", valid_from=utc_now(),
                               source_ids=[], set_by="model")
    engine.store.put_ledger(LedgerChanges(user_id="anna", profile=[model_value]))
    corrected = engine.set_profile("anna", "home", "Porto")
    assert [v.value for v in engine.profile("anna")["home"]] == ["Porto"]
    old = engine.profile_history("anna", "home")[0]
    assert (old.id, old.superseded_by) == ("v-model", corrected.id)


def test_remove_ends_a_value_and_keeps_it_as_history(engine):
    value = engine.set_profile("anna", "pets", "a cat named Rex", replace=False)
    removed = engine.remove_profile_value("anna", value.id)
    assert removed.id == value.id and removed.valid_to is not None and not removed.current
    assert engine.profile("anna") == {}
    assert [v.value for v in engine.profile_history("anna", "宠物")] == ["a cat named Rex"]
    again = engine.remove_profile_value("anna", value.id)  # already ended: unchanged
    assert again.valid_to == removed.valid_to


def test_unknown_values_users_and_keys(engine):
    assert engine.profile("nobody") == {}
    assert engine.profile_history("nobody", "home") == []
    with pytest.raises(NotFoundError):
        engine.remove_profile_value("anna", "no-such-value")
    value = engine.set_profile("anna", "home", "Porto")
    with pytest.raises(NotFoundError):  # another user's value is not found, not ended
        engine.remove_profile_value("bob", value.id)
    assert engine.profile("anna")["home"][0].current


@pytest.mark.parametrize("call", [
    lambda e: e.set_profile("anna", "home", None),
    lambda e: e.set_profile("anna", "home", ""),
    lambda e: e.set_profile("anna", "home", "   "),
    lambda e: e.set_profile("anna", "home", "x" * 5000),
    lambda e: e.set_profile("anna", "", "Porto"),
    lambda e: e.set_profile("anna", "!!!", "Porto"),
    lambda e: e.set_profile("anna", "k" * 1000, "Porto"),
    lambda e: e.set_profile("anna", 7, "Porto"),
    lambda e: e.set_profile("anna", "home", "Porto", replace="yes"),
    lambda e: e.set_profile("a/b", "home", "Porto"),
    lambda e: e.profile(None),
    lambda e: e.profile_history("anna", None),
    lambda e: e.profile_history("anna", "k" * 1000),
    lambda e: e.remove_profile_value("anna", 12),
    lambda e: e.remove_profile_value("anna", ""),
])
def test_wrong_arguments_are_validation_errors(engine, call):
    with pytest.raises(ValidationError):
        call(engine)
    assert engine.profile("anna") == {}


def test_a_key_is_never_folded_into_another_from_a_character_the_rule_refuses(engine):
    engine.set_profile("anna", "home", "Porto")
    for key, message in [("home\n", "key holds U+000A, a control character (Unicode Cc)"),
                         ("home\u200b", "key holds U+200B, a format character (Unicode Cf)"),
                         ("home ", "key begins or ends with white space"),
                         ("k" * 81, "key has 81 characters; a name or key is at most 80")]:
        with pytest.raises(ValidationError) as caught:
            engine.set_profile("anna", key, "Sintra")
        assert str(caught.value).startswith(message)
        with pytest.raises(ValidationError):
            engine.profile_history("anna", key)
    assert [v.value for v in engine.profile_history("anna", "home")] == ["Porto"]


def test_profiles_are_per_user(engine):
    engine.set_profile("anna", "home", "Porto")
    engine.set_profile("bob", "home", "Leeds")
    assert engine.profile("anna")["home"][0].value == "Porto"
    assert engine.profile("bob")["home"][0].value == "Leeds"
    assert [v.value for v in engine.profile_history("bob", "home")] == ["Leeds"]


def test_async_profile_twins(engine):
    async def run():
        value = await engine.aset_profile("anna", "diet", "vegetarian")
        return value, await engine.aprofile("anna"), await engine.aprofile_history("anna", "饮食")

    value, profile, history = asyncio.run(run())
    assert profile == {"diet": [value]} and history == [value]
