"""Consolidation with a misbehaving model: cut-off, looping, empty, misnumbered and slow answers.

The fake speaks real HTTP to the real `openai` client, so finish reasons, status codes and timeouts
go through our own client code. The rule everywhere: a message is marked done only when the
model's answer gives a verdict on it; everything else stays pending (or ends 'failed' after
``max_attempts``, with a WARNING), never silently done.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any, Callable, Iterator

import pytest

from memoryscope_plugins import MemoryScope, MemoryStatus
from memoryscope_plugins.models.factory import build_llm
from memoryscope_plugins.models.openai_compat import OpenAIChatModel
from memoryscope_plugins.settings import LLMSettings
from tests.support.consolidation_helpers import (
    Brain,
    Prompt,
    assistant_msg,
    at,
    entries,
    fast_policy,
    make_engine,
    make_settings,
    obs,
    parse_prompt,
    user_msg,
)
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion


def completion(text: str, finish_reason: str = "stop", completion_tokens: int = 50) -> Reply:
    body = openai_completion(text, prompt_tokens=100, completion_tokens=completion_tokens)
    body["choices"][0]["finish_reason"] = finish_reason
    return Reply(json=body)


class Scripted(Brain):
    """A Brain whose next extraction answers come from a queue of (text, finish_reason)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[tuple[str, str] | Callable[..., Any]] = []
        self.requests: list[dict] = []

    def __call__(self, server, request):
        body = request.json or {}
        self.requests.append(body)
        prompt = parse_prompt(body.get("messages") or [])
        with self.lock:
            self.prompts.append(prompt)
        if prompt.kind == "consolidate" and self.queue:
            item = self.queue.pop(0)
            text, reason = item(prompt) if callable(item) else item
            return completion(text, reason)
        return completion(self.answer(prompt))


@pytest.fixture
def scripted(server):
    fake = Scripted()
    server.route(OPENAI_CHAT, fake)
    return fake


def states(engine, user="anna"):
    return {m.message.content: (m.state, m.attempts) for m in engine.store.recent_messages(user, None, None, 1000)}


def good_answer(prompt: Prompt) -> str:
    return json.dumps(entries(prompt, [obs(f"Anna said: {c}", [n]) for n, _, _, c in prompt.new]))


# -- cut off at the token cap ------------------------------------------------------------------------


def test_a_cut_off_answer_keeps_its_complete_entries_and_asks_again_for_the_rest(tmp_path, server, scripted,
                                                                                 local_embedder, caplog):
    def cut(prompt):
        full = good_answer(prompt)
        third = full.index('{"n": 3')
        return full[:third + 30], "length"  # entries 1-2 whole, entry 3 cut in the middle

    scripted.queue = [cut]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg(f"fact number {i}", at(1)) for i in range(1, 5)])
        with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.consolidation"):
            report = engine.consolidate("anna")
        assert report.incomplete
        assert sorted(report.added) == [f"Anna said: fact number {i}" for i in range(1, 5)]
        assert {s for s, _ in states(engine).values()} == {"done"}
        # 3 and 4 were asked again, in a smaller batch; 1 and 2 never twice
        asked = [[c for _, _, _, c in p.new] for p in scripted.of_kind("consolidate")]
        assert asked[0] == [f"fact number {i}" for i in range(1, 5)]
        assert asked[1] == ["fact number 3", "fact number 4"]
        assert states(engine)["fact number 3"][1] == 1  # the cut-off counted as an attempt
        assert "token cap" in caplog.text and "fact number" not in caplog.text  # no content in logs
    finally:
        engine.close()


def test_a_single_message_cut_off_again_gets_a_bigger_budget_then_ends_failed_not_done(tmp_path, server, scripted,
                                                                                       local_embedder, caplog):
    looping = '{"messages": [{"n": 1, "says": "I collect", "observations": [' + \
        ', '.join(['{"content": "Anna collects stamps.", "about": "Anna"'] * 40)
    scripted.queue = [(looping, "length")] * 10
    engine = make_engine(tmp_path, server, local_embedder, max_attempts=3)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.consolidation"):
            report = engine.consolidate("anna")
        caps = [r["max_tokens"] for r in scripted.requests]
        assert caps == sorted(caps) and caps[-1] == 2 * caps[0] or caps[-1] > caps[0]
        assert states(engine)["I collect stamps."] == ("failed", 3)
        assert report.failed_messages == 1 and report.added == []
        assert report.llm_calls == 3 and report.completion_tokens == 150  # every attempt's cost is counted
        assert "gave up on 1 message(s)" in caplog.text
    finally:
        engine.close()


def test_a_looping_answer_that_closes_keeps_each_observation_once(tmp_path, server, scripted, local_embedder,
                                                                  caplog):
    item = {"content": "Anna collects stamps.", "about": "Anna", "kind": "fact", "reality": "real", "time": None,
            "date": None, "importance": 2}
    scripted.queue = [(json.dumps({"messages": [{"n": 1, "says": "I collect", "observations": [item] * 25}]}),
                       "stop")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.consolidation"):
            report = engine.consolidate("anna")
        assert report.added == ["Anna collects stamps."]
        assert "looping" in caplog.text
    finally:
        engine.close()


# -- empty, misnumbered, partial ---------------------------------------------------------------------


def test_an_empty_answer_is_asked_again_then_left_pending_with_its_cost(tmp_path, server, scripted, local_embedder):
    scripted.queue = [("", "stop"), ("   ", "stop")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        report = engine.consolidate("anna")
        assert report.errors and report.llm_calls == 2 and report.prompt_tokens == 200
        assert states(engine)["I collect stamps."] == ("pending", 1)
        assert engine.consolidate("anna").added == ["Anna said: I collect stamps."]  # the next run succeeds
    finally:
        engine.close()


def test_an_entry_is_placed_by_the_words_it_quotes_not_by_its_number(tmp_path, server, scripted, local_embedder):
    def shifted(prompt):
        # the model numbers the second message "1" but quotes its words; message 1 gets no entry
        return json.dumps({"messages": [
            {"n": 1, "says": "My brother Jonas", "observations": [
                {"content": "Anna's brother Jonas is a nurse.", "about": "Jonas", "kind": "relation"}]},
            {"n": 7, "observations": []}]}), "stop"

    scripted.queue = [shifted]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I had a long day.", at(1)), assistant_msg("Tell me about it!", at(1)),
                               user_msg("My brother Jonas is a nurse, he works nights.", at(1))])
        report = engine.consolidate("anna")
        [memory] = [m for m in engine.list("anna", types=["observation"]) if "Jonas" in m.content]
        jonas_message = next(m for m in engine.store.recent_messages("anna", None, None, 10)
                             if m.message.content.startswith("My brother"))
        assert memory.source_ids == [jonas_message.id] and memory.metadata["said_by"] == "Anna"
        # "I had a long day." had no verdict in that answer: it was asked again, alone
        assert [c for _, _, _, c in scripted.of_kind("consolidate")[1].new] == ["I had a long day."]
        assert report.outcomes and all(s == "done" for s, _ in states(engine).values())
    finally:
        engine.close()


def test_the_assistants_words_are_context_never_the_users_facts(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My knees hurt when I run.", at(1)),
                               assistant_msg("You could try swimming or cycling instead.", at(1)),
                               user_msg("Maybe.", at(1))])
        report = engine.consolidate("anna")
        [prompt] = brain.of_kind("consolidate")
        assert [c for _, _, _, c in prompt.new] == ["My knees hurt when I run.", "Maybe."]
        assert [c for _, _, c in prompt.between] == ["You could try swimming or cycling instead."]
        schema = scripted_schema(server)
        assert len(schema["properties"]["messages"]["prefixItems"]) == 2
        assert not any("swimming" in m.content for m in engine.list("anna", types=["observation"]))
        assistant_id = next(m.id for m in engine.store.recent_messages("anna", None, None, 10)
                            if m.message.role == "assistant")
        assert report.outcomes[assistant_id].startswith("the assistant's words")
    finally:
        engine.close()


def scripted_schema(server) -> dict:
    body = server.requests_to(OPENAI_CHAT)[0].json
    return body["response_format"]["json_schema"]["schema"]


def test_first_person_text_is_framed_as_the_speakers_words(tmp_path, server, brain, local_embedder):
    brain.extract = lambda p: [obs("I'm allergic to shellfish.", [1]), obs("Anna's dog is called Rex.", [1])]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I'm allergic to shellfish and my dog is called Rex.", at(1))])
        engine.consolidate("anna")
        contents = sorted(m.content for m in engine.list("anna", types=["observation"]))
        assert contents == ['Anna said: "I\'m allergic to shellfish."', "Anna's dog is called Rex."]
    finally:
        engine.close()


# -- dates only from the message's own words ---------------------------------------------------------


def test_event_dates_come_only_from_time_words_the_message_holds(tmp_path, server, brain, local_embedder):
    said = at(13, hour=9)  # Wednesday 2026-05-13

    def extract(prompt):
        return [obs("Anna visits her aunt.", [1], kind="plan", time="next month", date="2026-06-01"),  # invented
                obs("Anna hunts for eggs.", [2], kind="event", time="every Easter", date="2026-04-05"),  # a habit
                obs("Anna moved to Porto.", [3], kind="event")]  # no time given: read from the message

    brain.extract = extract
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I will visit my aunt soon.", said),
                               user_msg("Every Easter I hunt for eggs.", said),
                               user_msg("Two weeks ago I moved to Porto.", said)])
        engine.consolidate("anna")
        by_text = {m.content: m for m in engine.list("anna", types=["observation"])}
        assert by_text["Anna visits her aunt."].event_start is None
        assert by_text["Anna hunts for eggs."].event_start is None
        moved = by_text["Anna moved to Porto."]
        assert moved.event_start is not None and moved.event_start.date().isoformat() < "2026-05-13"
    finally:
        engine.close()


# -- repeats and contradictions ----------------------------------------------------------------------


def test_a_model_that_calls_everything_outdated_expires_only_what_the_engine_suspects(tmp_path, server, brain,
                                                                                    local_embedder):
    brain.extract = lambda p: [obs(f"Anna said: {c}", [n]) for n, _, _, c in p.new]
    brain.judge = lambda p: ["outdated"]  # a weak model: "no longer true" to every question
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My brother Jonas lives in Hamburg.", at(1))])
        engine.consolidate("anna")
        engine.record("anna", [user_msg("My brother works as a night nurse.", at(2))])
        report = engine.consolidate("anna")
        # related (a shared term) but no change, no opposite, no other value: nothing to ask
        assert brain.of_kind("judge") == [] and report.expired == []
        assert len(engine.list("anna", types=["observation"], include_expired=False)) == 2
        engine.record("anna", [user_msg("My brother Jonas moved away from Hamburg.", at(3))])
        engine.consolidate("anna")
        # a change, and related: that pair alone is asked
        asked = [q.pairs[0][1] for q in brain.of_kind("judge")]
        assert asked == ["Anna said: My brother Jonas lives in Hamburg."]
    finally:
        engine.close()


def test_judge_answers_with_wrong_numbers_or_no_json_keep_both_memories(tmp_path, server, brain, local_embedder,
                                                                        caplog):
    brain.extract = lambda p: [obs(f"Anna said: {c}", [n]) for n, _, _, c in p.new]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Lisbon.", at(1))])
        engine.consolidate("anna")
        brain.judge = lambda p: json.dumps({"verdict": "outdated", "n": 9})  # not the shape asked for
        engine.record("anna", [user_msg("I live in Lisbon near the river now.", at(2))])
        engine.consolidate("anna")
        assert all(m.status is MemoryStatus.ACTIVE for m in engine.list("anna", types=["observation"]))
        brain.judge = lambda p: "no idea"
        engine.record("anna", [user_msg("I moved out of Lisbon.", at(3))])
        with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.consolidation"):
            report = engine.consolidate("anna")
        assert report.unjudged >= 1 and "both memories are kept" in caplog.text
        assert all(m.status is MemoryStatus.ACTIVE for m in engine.list("anna", types=["observation"]))
    finally:
        engine.close()


def test_an_outdated_verdict_about_another_person_is_ignored(tmp_path, server, brain, local_embedder):
    def extract(prompt):
        out = []
        for n, _, _, content in prompt.new:
            if "sister" in content:
                out.append(obs("Anna's sister Clara lives in Porto.", [n], about="Clara"))
            else:
                out.append(obs("Anna lives in Lisbon.", [n], about="Anna"))
        return out

    brain.extract = extract
    brain.judge = lambda p: ["outdated"] * len(p.pairs)
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Lisbon.", at(1))])
        engine.consolidate("anna")
        engine.record("anna", [user_msg("My sister Clara lives in Porto.", at(2))])
        engine.consolidate("anna")
        assert all(m.status is MemoryStatus.ACTIVE for m in engine.list("anna", types=["observation"]))
    finally:
        engine.close()


def test_a_value_the_message_corrects_is_stored_as_meant(tmp_path, server, brain, local_embedder):
    """The shared model wrote only the value said before "哦不对" (dev scenarios, 27 November): the
    memory holds the value said after it, and the model's words are kept beside it."""
    said = "算了，没兴趣。对了，我们组的周会是每周三上午，哦不对，是每周四上午。"
    brain.extract = lambda p: [obs("王磊的组的周会是每周三上午。", [n]) for n, _, _, c in p.new if c == said]
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        engine.record("wl", [user_msg(said, at(1), name="王磊")])
        report = engine.consolidate("wl")
        [memory] = engine.list("wl", types=["observation"], include_expired=True)
        assert memory.content == "王磊的组的周会是每周四上午。" and memory.status is MemoryStatus.ACTIVE
        assert memory.metadata["model_wrote"] == "王磊的组的周会是每周三上午。"
        assert report.added == ["王磊的组的周会是每周四上午。"] and report.unaccounted_ids == []
    finally:
        engine.close()


def test_a_correction_within_one_conversation_expires_the_first_version(tmp_path, server, brain, local_embedder):
    def extract(prompt):
        return [obs("Anna's yoga class is on Wednesday." if "Wednesday" in c else
                    "Anna's yoga class is on Thursday.", [n]) for n, _, _, c in prompt.new]

    brain.extract = extract
    brain.judge = lambda p: ["outdated" if "Thursday" in new else "both" for _, _, new in p.pairs]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My yoga class is on Wednesday.", at(1)),
                               user_msg("Sorry, I meant Thursday.", at(1))])
        report = engine.consolidate("anna")
        mems = {m.content: m for m in engine.list("anna", types=["observation"])}
        old, new = mems["Anna's yoga class is on Wednesday."], mems["Anna's yoga class is on Thursday."]
        assert old.status is MemoryStatus.EXPIRED and old.superseded_by == new.id
        assert report.expired == ["Anna's yoga class is on Wednesday."]
    finally:
        engine.close()


# -- endpoints: structured output, options, timeouts -------------------------------------------------


def test_structured_output_steps_down_to_what_the_endpoint_accepts(tmp_path, server, brain, local_embedder):
    server.script(OPENAI_CHAT, [
        Reply(status=500, json={"detail": "validation error: body.response_format.type: Input should be "
                                          "'text' or 'json_object'"}),  # llama-cpp-python's answer
        Reply(status=400, json={"error": {"message": "Unrecognized request argument: response_format.schema"}}),
    ])
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        report = engine.consolidate("anna")
        assert report.added == ["Anna said: I collect stamps."]
        sent = [r.json["response_format"] for r in server.requests_to(OPENAI_CHAT)]
        assert [f["type"] for f in sent[:3]] == ["json_schema", "json_object", "json_object"]
        assert "schema" in sent[1] and "schema" not in sent[2]
        assert engine.llm.formats.mode == "json_object"  # remembered for the next calls
    finally:
        engine.close()


def test_a_refused_format_is_remembered_per_endpoint_across_engines(tmp_path, server, brain, local_embedder):
    """llama-cpp-python refuses json_schema with a 500: the second engine on the same endpoint and
    model must not ask for it again; another model on the same endpoint still may."""
    refusal = Reply(status=500, json={"detail": "validation error: body.response_format.type: Input should be "
                                                "'text' or 'json_object'"})

    def refusing(fake, request):
        if request.json.get("response_format", {}).get("type") == "json_schema":
            return refusal
        return brain(fake, request)

    server.route(OPENAI_CHAT, refusing)

    def schema_attempts():
        return sum(1 for r in server.requests_to(OPENAI_CHAT)
                   if r.json.get("response_format", {}).get("type") == "json_schema")

    for run in range(2):
        engine = make_engine(tmp_path / f"engine{run}", server, local_embedder)
        try:
            engine.record("anna", [user_msg(f"I collect stamps {run}.", at(1))])
            assert engine.consolidate("anna").added
        finally:
            engine.close()
    assert schema_attempts() == 1  # asked once for the process, not once per engine

    other = OpenAIChatModel("another-model", base_url=server.url + "/v1", api_key="sk-test-0123456789",
                            retry_policy=fast_policy(2))
    assert other.formats.mode == "json_schema"  # refusals are per model, too
    same = OpenAIChatModel("fake-llm", base_url=server.url + "/v1/", api_key="sk-test-0123456789",
                           retry_policy=fast_policy(2))
    assert same.formats.mode == "json_object_schema"


def test_provider_options_from_settings_reach_every_request(tmp_path, server, brain, local_embedder):
    cfg = LLMSettings(provider="openai", model="qwen", base_url=server.url + "/v1",
                      extra_body={"repeat_penalty": 1.1, "enable_thinking": False})
    llm = build_llm(cfg)
    engine = MemoryScope(make_settings(tmp_path), embedder=local_embedder, llm=llm)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        engine.consolidate("anna")
        body = server.requests_to(OPENAI_CHAT)[0].json
        assert body["repeat_penalty"] == 1.1 and body["enable_thinking"] is False
        assert body["max_tokens"] > 0  # consolidation always caps its answers
    finally:
        engine.close()


def test_local_endpoints_get_patient_defaults():
    local = LLMSettings(provider="openai", model="m", base_url="http://127.0.0.1:8081/v1")
    remote = LLMSettings(provider="openai", model="m", base_url="https://api.example.com/v1")
    assert local.effective_timeout_s() > remote.effective_timeout_s()
    assert not local.effective_retry_timeouts() and remote.effective_retry_timeouts()
    assert local.effective_max_retries() < remote.effective_max_retries()
    assert LLMSettings(provider="openai", model="m", base_url="http://127.0.0.1:8081/v1",
                       retry_timeouts=True).effective_retry_timeouts()


def test_a_timeout_on_a_local_server_is_not_retried_and_its_request_is_counted(tmp_path, server, brain,
                                                                               local_embedder):
    server.script(OPENAI_CHAT, [Reply(delay=1.5, json=openai_completion("{}"))])
    cfg = LLMSettings(provider="openai", model="qwen", base_url=server.url + "/v1", timeout_s=0.3)
    engine = MemoryScope(make_settings(tmp_path), embedder=local_embedder, llm=build_llm(cfg))
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        report = engine.consolidate("anna")
        assert report.errors and report.llm_calls == 1
        assert len(server.requests_to(OPENAI_CHAT)) == 1  # no duplicate job queued behind the first
        assert states(engine)["I collect stamps."] == ("pending", 1)
    finally:
        engine.close()


def test_a_failed_step_reports_every_request_it_sent(tmp_path, server, brain, local_embedder):
    server.script(OPENAI_CHAT, [Reply(status=503, json={"error": {"message": "busy"}})] * 3)
    engine = make_engine(tmp_path, server, local_embedder, attempts=3)
    try:
        engine.record("anna", [user_msg("I collect stamps.", at(1))])
        report = engine.consolidate("anna")
        assert report.errors and report.llm_calls == 3
    finally:
        engine.close()


def test_close_returns_within_its_timeout_while_a_model_call_runs(tmp_path, server, brain, local_embedder):
    server.script(OPENAI_CHAT, [Reply(delay=10.0, json=openai_completion("{}"))])
    engine = make_engine(tmp_path, server, local_embedder, start_worker=True, close_timeout_s=0.5)
    engine.record("anna", [user_msg("I collect stamps.", at(1))])
    assert _wait(lambda: server.requests_to(OPENAI_CHAT))
    started = time.monotonic()
    engine.close()
    # far from both: the 0.5 s close timeout and the 10 s the model takes (a loaded machine stays between)
    assert time.monotonic() - started < 7.0
    again = make_engine(tmp_path, server, local_embedder)
    try:
        assert states(again)["I collect stamps."][0] == "pending"  # nothing lost, nothing half-written
        assert again.consolidate("anna").added == ["Anna said: I collect stamps."]
    finally:
        again.close()


def _wait(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


# -- reflection ----------------------------------------------------------------------------------------


def test_reflection_refuses_prompt_markup_and_unfounded_insights(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I ran 10 km on Sunday.", at(1)), user_msg("I love sushi.", at(1))])
        engine.consolidate("anna")

        def reflect(prompt):
            run = next(label for label, t in prompt.observations.items() if "10 km" in t)
            sushi = next(label for label, t in prompt.observations.items() if "sushi" in t)
            return [{"subject": "Sport of Anna", "value": f"Anna ran 10 km. (rests on {run})", "sources": [run]},
                    {"subject": "Hobbies of Tom", "value": "Anna ran 10 km on Sunday.", "sources": [run]},
                    {"subject": "Food of Anna", "value": "Anna plays the cello in an orchestra.", "sources": [sushi]},
                    {"subject": "Food of Anna", "value": "Anna loves sushi.", "sources": [sushi]}]

        brain.reflect = reflect
        report = engine.reflect("anna")
        assert [i.content for i in engine.list("anna", types=["insight"])] == ["Food of Anna: Anna loves sushi."]
        assert len(report.rejected) == 3
    finally:
        engine.close()


def _reflect_cut_off(brain: Brain, times: int, asked: list[int]) -> Callable[..., Reply]:
    """The Brain behind the server, but its first `times` reflection answers stop at the cap (a
    looping model: the same insight again and again, cut off); records each reflect call's max_tokens."""
    def route(server_, request):
        reply = brain(server_, request)
        body = request.json or {}
        if parse_prompt(body.get("messages") or []).kind != "reflect":
            return reply
        asked.append(body.get("max_tokens"))
        if len(asked) > times:
            return reply
        loop = '{"insights": [' + '{"subject": "Sport of Anna", "value": "Anna runs.", "sources": ["O1"]}, ' * 40
        return completion(loop[:600], "length", completion_tokens=body.get("max_tokens") or 30_000)
    return route


@contextlib.contextmanager
def _reflecting(tmp_path, server, local_embedder, route: Callable[..., Reply],
                **settings: Any) -> Iterator[MemoryScope]:
    """An engine whose model is ``route``, with one consolidated message's observation to reflect on."""
    server.route(OPENAI_CHAT, route)
    engine = make_engine(tmp_path, server, local_embedder, **settings)
    try:
        engine.record("anna", [user_msg("I ran 10 km on Sunday.", at(1))])
        engine.consolidate("anna")
        yield engine
    finally:
        engine.close()


def test_a_reflection_answer_is_capped_and_asked_again_once_when_cut_off(tmp_path, server, local_embedder):
    """A 1.5B model looped on one reflection answer for half an hour (no cap): the call now asks for
    an extraction's budget, and a cut-off answer is asked again once with twice that."""
    brain, asked = Brain(), []
    brain.reflect = lambda prompt: [{"subject": "Sport of Anna", "value": "Anna ran 10 km on Sunday.",
                                     "sources": [next(iter(prompt.observations))]}]
    with _reflecting(tmp_path, server, local_embedder, _reflect_cut_off(brain, 1, asked)) as engine:
        report = engine.reflect("anna")
        assert len(asked) == 2 and asked[0] is not None and asked[1] == 2 * asked[0]
        assert asked[0] <= engine.settings.consolidation.max_output_tokens
        insights = [i.content for i in engine.list("anna", types=["insight"])]
        assert insights == ["Sport of Anna: Anna ran 10 km on Sunday."]
        assert not report.errors


def test_a_reflection_cut_off_twice_leaves_the_observations_for_later(tmp_path, server, local_embedder):
    asked: list[int] = []
    with _reflecting(tmp_path, server, local_embedder, _reflect_cut_off(Brain(), 2, asked)) as engine:
        report = engine.reflect("anna")
        assert len(asked) == 2 and report.errors and engine.list("anna", types=["insight"]) == []
        observations = engine.list("anna", types=["observation"])
        assert observations and all(m.metadata.get("reflected") is False for m in observations)
        assert all(m.metadata.get("reflect_attempts") == 1 for m in observations)


def test_reflection_gives_up_on_observations_after_max_attempts(tmp_path, server, local_embedder, caplog):
    """A model that always loops on them no longer costs two calls on every pass: after
    ``max_attempts`` failed reflections the observations are marked reflected, without an insight."""
    asked: list[int] = []
    with _reflecting(tmp_path, server, local_embedder, _reflect_cut_off(Brain(), 1000, asked),
                     max_attempts=3) as engine:
        for attempt in (1, 2, 3):
            assert engine.reflect("anna").errors and len(asked) == 2 * attempt
        observations = engine.list("anna", types=["observation"])
        assert observations and all(m.status is MemoryStatus.ACTIVE for m in observations)
        assert all(m.metadata.get("reflected") is True and m.metadata.get("reflect_gave_up") is True
                   and m.metadata.get("reflect_attempts") == 3 for m in observations)
        assert "gave up on 1 observation(s) after 3 attempts" in caplog.text
        report = engine.reflect("anna")
        assert len(asked) == 6 and not report.errors and engine.list("anna", types=["insight"]) == []
        engine.record("anna", [user_msg("I swam 2 km on Monday.", at(2))])  # a new observation is tried again
        engine.consolidate("anna")
        engine.reflect("anna")
        assert len(asked) == 8


def test_a_chat_reply_cut_off_at_the_cap_is_recorded_as_incomplete(tmp_path, server, local_embedder):
    server.script(OPENAI_CHAT, [completion("Here are three ideas: first, a walk; second,", "length")])
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        turn = engine.chat_with_memory("anna", "Any ideas for Sunday?")
        assert turn.truncated
        reply = next(m for m in engine.list("anna", types=["turn"]) if m.role == "assistant")
        assert reply.metadata["truncated"] is True
    finally:
        engine.close()
