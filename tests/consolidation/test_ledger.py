"""The entity ledger and the profile built by consolidation, end to end: the real engine and store,
the real `openai` client, and a fake HTTP model whose answers carry entities and profile values,
well formed or the way small models write them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.consolidation_helpers import at, entries, make_engine, named, obs, raw_entities, user_msg

MESSAGES = ["My friend Mel runs a vintage shop in Boston.", "Thanks, see you!"]


def states(engine, user="anna") -> dict[str, tuple[str, int]]:
    return {m.message.content: (m.state, m.attempts) for m in engine.store.recent_messages(user, None, None, 1000)}


def contents(engine, user="anna") -> list[str]:
    return sorted(m.content for m in engine.list(user, types=["observation"]))


def run(tmp_path, server, brain, local_embedder, extra: list[Any], name: str = "run") -> tuple[Any, dict, list[str]]:
    """Consolidate `MESSAGES` with the observation of a good answer plus ``extra`` (entities)."""
    brain.extract = lambda p: [obs("Anna's friend Mel runs a vintage shop in Boston.", [1], about="Mel"), *extra]
    engine = make_engine(tmp_path / name, server, local_embedder)
    try:
        engine.record("anna", [user_msg(text, at(1)) for text in MESSAGES])
        report = engine.consolidate("anna")
        return report, states(engine), contents(engine)
    finally:
        engine.close()


MISBEHAVIOURS = {
    "left out": [raw_entities(..., 1), raw_entities(..., 2)],
    "null": [raw_entities(None, 1), raw_entities(None, 2)],
    "a string": [raw_entities("Mel, Boston", 1)],
    "an object": [raw_entities({"name": "Boston", "kind": "city"}, 1)],
    "unknown kinds": [named("Mel", 1, kind="friend-ish"), named("Boston", 1, kind=None)],
    "names not in the message": [named("Caroline", 1), named("Paris", 2, kind="place")],
    "a loop": [named("Mel", 1)] * 60,
    "huge names": [named("Mel runs a vintage shop in Boston " * 20, 1), named("x" * 5000, 1)],
    "junk items": [raw_entities([None, 3, ["Mel"], {"name": {"x": 1}}, "Mel"], 1)],
    "bad profile values": [obs("Anna likes Boston.", [1], profile="nonsense"),
                           obs("Anna shops in Boston.", [1], profile={"key": None, "value": ["Boston"]})],
}


@pytest.mark.parametrize("case", sorted(MISBEHAVIOURS))
def test_what_a_model_writes_in_the_extras_never_changes_the_verdicts(tmp_path, server, brain, local_embedder, case):
    clean_report, clean_states, clean_contents = run(tmp_path, server, brain, local_embedder, [], "clean")
    report, got_states, got_contents = run(tmp_path, server, brain, local_embedder, MISBEHAVIOURS[case], case)
    assert got_states == clean_states == dict.fromkeys(MESSAGES, ("done", 0))
    assert report.unaccounted_ids == [] and not report.errors and not report.incomplete
    assert [c for c in got_contents if c in clean_contents] == clean_contents


def test_an_answer_cut_off_in_an_entity_list_asks_that_message_again(tmp_path, server, brain, local_embedder):
    answered: list[list[str]] = []

    def cut_then_whole(server_, request):
        reply = brain(server_, request)
        prompt = brain.prompts[-1]
        if prompt.kind != "consolidate":
            return reply
        answered.append([content for *_, content in prompt.new])
        body = reply.json
        text = body["choices"][0]["message"]["content"]
        if len(answered) == 1:  # the first answer stops inside the second entry's entities
            body["choices"][0]["message"]["content"] = text[:text.index('"Boston"') + 3]
            body["choices"][0]["finish_reason"] = "length"
        return reply

    from tests.support.fakes.fake_model_server import OPENAI_CHAT
    server.route(OPENAI_CHAT, cut_then_whole)
    brain.extract = lambda p: [obs(f"Anna said: {c}", [n]) for n, _, _, c in p.new] + \
        [named("Boston", n, kind="place") for n, _, _, c in p.new if "Boston" in c]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("Hello there, I'm new here.", at(1)),
                               user_msg("My shop is in Boston.", at(1))])
        report = engine.consolidate("anna")
        assert report.incomplete
        assert answered == [["Hello there, I'm new here.", "My shop is in Boston."], ["My shop is in Boston."]]
        assert states(engine) == {"Hello there, I'm new here.": ("done", 0), "My shop is in Boston.": ("done", 1)}
    finally:
        engine.close()


def test_the_entities_schema_reaches_the_endpoint(tmp_path, server, brain, local_embedder):
    from tests.support.fakes.fake_model_server import OPENAI_CHAT
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My friend Mel runs a vintage shop in Boston.", at(1))])
        engine.consolidate("anna")
        body = server.requests_to(OPENAI_CHAT)[0].json
        entry = body["response_format"]["json_schema"]["schema"]["properties"]["messages"]["prefixItems"][0]
        assert "entities" in entry["required"]
        system = body["messages"][0]["content"]
        assert '"entities"' in system and '"alias_of"' in system and '"profile"' in system
        assert json.loads(json.dumps(entries(brain.prompts[0], [])))["messages"][0]["entities"] == []
    finally:
        engine.close()
