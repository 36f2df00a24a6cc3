"""Short forms a speaker is addressed by (`person.short_forms`): which words address someone, whose
short form a word is, and the aliases recording adds."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from memoryscope_plugins.person.short_forms import addressed, addressed_aliases, short_form_owner
from tests.person.helpers import T0, entity

LATER = T0 + timedelta(days=1)


def speaker(entity_id: str, name: str, *aliases: str, role: str = "assistant"):
    return dataclasses.replace(entity(entity_id, name, *aliases), metadata={"speaker_role": role})


@pytest.mark.parametrize(("text", "expected"), [
    ("Hey Mel!", True), ("Nice one, Mel!", True), ("Mel, look at this.", True), ("Thanks Mel", True),
    ("Hi Mel, how are you?", True), ("Great.\nMel!", True),
    ("My friend Mel runs a shop.", False), ("I saw Mel.", False), ("Melanie!", False), ("Mellow, Mel-like.", False),
])
def test_addressed_is_a_vocative_only(text, expected):
    assert addressed("Mel", text) is expected


@pytest.mark.parametrize(("word", "names", "owner"), [
    ("Mel", ["Caroline", "Melanie"], "Melanie"),
    ("Mel", ["Caroline", "Melanie Brooks"], "Melanie Brooks"),
    ("Mel", ["Melanie", "Melissa"], None),  # two it could be
    ("Mel", ["Mel Gibson", "Melanie"], None),  # someone goes by it in full
    ("Mo", ["Monica"], None),  # too short
    ("mel", ["Melanie"], None),  # not written as a name
    ("Lanie", ["Melanie"], None),  # does not begin the name
    ("Bro", ["Caroline", "Brooks Mel"], "Brooks Mel"),  # the first name only
])
def test_short_form_owner(word, names, owner):
    assert short_form_owner(word, names) == owner


def test_addressed_aliases_gives_each_speaker_their_short_form_once():
    caroline, melanie = speaker("c", "Caroline", role="user"), speaker("m", "Melanie")
    said = [("Caroline", "Hey Mel!"), ("Caroline", "Nice one, Mel!"), ("Melanie", "Thanks, Caro!")]
    changed = addressed_aliases([caroline, melanie], said, LATER)
    assert sorted((e.name, e.aliases, e.updated_at) for e in changed) == [
        ("Caroline", ["Caro"], LATER), ("Melanie", ["Mel"], LATER)]
    assert melanie.aliases == [] and caroline.aliases == []  # inputs untouched


@pytest.mark.parametrize("said", [
    [("Melanie", "Hey Mel!")],  # a speaker calling herself so
    [("Caroline", "My friend Mel runs a shop.")],
    [("Caroline", "Hey Mel!")],  # Mel is known already (below)
])
def test_addressed_aliases_adds_nothing_without_a_clear_link(said):
    known = [speaker("m", "Melanie"), speaker("c", "Caroline", role="user")]
    if said == [("Caroline", "Hey Mel!")]:
        known.append(entity("x", "Mel"))
    assert addressed_aliases(known, said, LATER) == []


def test_only_speakers_gain_short_forms():
    assert addressed_aliases([entity("m", "Melanie")], [("Caroline", "Hey Mel!")], LATER) == []


def test_addressed_aliases_checks_its_input():
    with pytest.raises(TypeError):
        addressed_aliases(["Melanie"], [], LATER)
    with pytest.raises(TypeError):
        addressed_aliases([speaker("m", "Melanie")], [("Caroline", None)], LATER)
    with pytest.raises(TypeError):
        addressed_aliases([speaker("m", "Melanie")], [(3, "Hey Mel!")], LATER)
