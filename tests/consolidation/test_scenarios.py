"""Consolidation and reflection end to end: real engine, real store, real `openai` client, and a
fake HTTP model that answers from the prompt it is actually sent."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memoryscope_plugins import MemoryStatus, MemoryType
from tests.support.consolidation_helpers import assistant_msg, at, make_engine, obs, user_msg


@pytest.fixture
def engine(tmp_path, server, brain, local_embedder):
    memory = make_engine(tmp_path, server, local_embedder)
    yield memory
    memory.close()


def observations(engine, user="anna", **kwargs):
    return engine.list(user, types=["observation"], **kwargs)


def test_preference_change_over_sessions_expires_the_old_memory(engine, brain):
    engine.record("anna", [user_msg("Hi", at(1)), user_msg("I'm vegetarian, by the way.", at(1)),
                           assistant_msg("Noted, vegetarian it is.", at(1))])
    first = engine.consolidate("anna")
    assert first.added == ["Anna is vegetarian."] and first.llm_calls == 1
    # a repetition a week later: merged, no new memory
    engine.record("anna", [user_msg("As a vegetarian I loved that dish.", at(8))])
    repeat = engine.consolidate("anna")
    assert repeat.added == [] and repeat.merged == ["Anna is vegetarian."]
    # weeks later the preference changes
    engine.record("anna", [user_msg("I started eating fish again.", at(10, month=6))])
    change = engine.consolidate("anna")
    assert change.expired == ["Anna is vegetarian."]
    mems = observations(engine)
    active = [m for m in mems if m.status is MemoryStatus.ACTIVE]
    expired = [m for m in mems if m.status is MemoryStatus.EXPIRED]
    assert len(active) == 1 and len(expired) == 1
    assert expired[0].superseded_by == active[0].id
    assert active[0].content == "Anna started eating fish again; Anna is no longer vegetarian."
    assert expired[0].metadata["mentions"] == 2 and len(expired[0].source_ids) == 2
    # the engine found the old memory and put the pair to the model as a small question
    judged = brain.of_kind("judge")[-1]
    assert ("Anna is vegetarian.", "Anna started eating fish again; Anna is no longer vegetarian.") in \
        [(old, new) for _, old, new in judged.pairs]
    # retrieval no longer offers the expired one by default, but keeps it for history
    found = engine.retrieve("anna", "Is Anna vegetarian?", types=["observation"]).memories
    assert [m.memory.id for m in found] == [active[0].id]
    assert engine.count("anna") == 5 + 2  # five turns + two observations: nothing deleted


def test_relative_date_becomes_the_right_absolute_event_date(engine, brain):
    said = at(13, hour=9)  # Wednesday 2026-05-13
    engine.record("anna", [user_msg("Last Friday I ran my first half marathon!", said)])
    engine.consolidate("anna")
    [memory] = observations(engine)
    # the model said 2026-05-15 (wrong); the rule-based parse of "last Friday" corrects it
    assert memory.event_start.date().isoformat() == "2026-05-08"
    assert memory.event_end.date().isoformat() == "2026-05-09"
    assert memory.created_at == said
    assert memory.metadata["event_time_source"] == "rule"
    # the prompt showed the message date and weekday, so a real model can compute it
    assert brain.prompts[0].new[0][1] == "2026-05-13 Wed 09:00"


def test_llm_date_is_kept_when_it_agrees_and_is_more_precise(engine, brain):
    brain.extract = lambda p: [obs("Anna went to Porto.", [1], kind="event", time="last week", date="2026-05-06")]
    engine.record("anna", [user_msg("Last week, on Wednesday, I went to Porto.", at(13))])
    engine.consolidate("anna")
    [memory] = observations(engine)
    assert memory.event_start.date().isoformat() == "2026-05-06"
    assert memory.metadata["event_time_source"] == "rule+llm"


@pytest.mark.parametrize("job_kind, job_time", [("fact", None), ("fact", "last month"), ("event", "last month")])
def test_time_words_date_the_event_not_the_state_beside_it(engine, brain, job_kind, job_time):
    """Issue 21: "I moved ... last month and I work as a nurse": the move is dated, the job is not,
    whatever time words or kind the model puts on the job."""
    brain.extract = lambda p: [
        obs("Tom moved to Hangzhou.", [1], about="Tom", kind="event", time="last month", date="2026-10"),
        obs("Tom works as a nurse at a children's hospital.", [1], about="Tom", kind=job_kind, time=job_time,
            date="2026-10" if job_time else None)]
    said = datetime(2026, 11, 25, 9, 0, tzinfo=timezone.utc)
    engine.record("tom", [user_msg("Hi, I'm Tom. I moved to Hangzhou last month and I work as a nurse at a "
                                   "children's hospital.", said, name="Tom")])
    engine.consolidate("tom")
    by_text = {m.content: m for m in observations(engine, "tom")}
    move, job = by_text["Tom moved to Hangzhou."], by_text["Tom works as a nurse at a children's hospital."]
    assert (move.event_start.date().isoformat(), move.event_end.date().isoformat()) == ("2026-10-01", "2026-11-01")
    assert job.event_start is None and job.event_end is None


def test_a_state_in_the_same_clause_as_an_event_still_gets_no_event_date(engine, brain):
    brain.extract = lambda p: [
        obs("Anna moved to Hangzhou.", [1], kind="event", time="last month", date="2026-04"),
        obs("Anna works as a nurse at a children's hospital.", [1], kind="fact", time="last month", date="2026-04")]
    engine.record("anna", [user_msg("I work as a nurse at a children's hospital after moving to Hangzhou last month.",
                                    at(13))])
    engine.consolidate("anna")
    by_text = {m.content: m for m in observations(engine)}
    assert by_text["Anna moved to Hangzhou."].event_start.date().isoformat() == "2026-04-01"
    assert by_text["Anna works as a nurse at a children's hospital."].event_start is None


def test_a_state_dated_from_its_start_gets_the_start_only(engine, brain):
    brain.extract = lambda p: [obs("Anna has worked as a nurse since May.", [1], kind="fact", time="since May",
                                   date="2026-05")]
    engine.record("anna", [user_msg("I've been working as a nurse since May.", at(13))])
    engine.consolidate("anna")
    [job] = observations(engine)
    assert job.event_start.date().isoformat() == "2026-05-01" and job.event_end is None
    assert job.metadata["event_time_kind"] == "start"


def test_chinese_time_words_date_only_their_own_clause(tmp_path, server, brain, local_embedder):
    brain.extract = lambda p: [obs("小汤上个月搬到了杭州。", [1], about="小汤", kind="event"),
                               obs("小汤在一家儿童医院当护士。", [1], about="小汤", kind="fact")]
    memory = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        said = datetime(2026, 11, 25, 9, 0, tzinfo=timezone.utc)
        memory.record("xt", [user_msg("我上个月搬到了杭州，在一家儿童医院当护士。", said, name="小汤")])
        memory.consolidate("xt")
        by_text = {m.content: m for m in memory.list("xt", types=["observation"])}
        assert by_text["小汤上个月搬到了杭州。"].event_start.date().isoformat() == "2026-10-01"
        assert by_text["小汤在一家儿童医院当护士。"].event_start is None
    finally:
        memory.close()


def test_a_reworded_repeat_refreshes_the_known_fact_and_small_talk_is_dropped(engine, brain):
    """Issue 21: "As I mentioned, my dog Biscuit is a golden retriever." adds no copy: the known
    observation gets a mention, a new updated_at and the new source; small talk adds nothing."""
    wording = {"I have a golden retriever called Biscuit.": "Anna has a golden retriever called Biscuit.",
               "As I mentioned, my dog Biscuit is a golden retriever.": "Anna's dog Biscuit is a golden retriever.",
               "Lovely weather today, isn't it?": "Anna says the weather is lovely today."}
    brain.extract = lambda p: [obs(wording[c], [n]) for n, _, _, c in p.new if c in wording]
    engine.record("anna", [user_msg("I have a golden retriever called Biscuit.", at(1))])
    engine.consolidate("anna")
    [first] = observations(engine)
    engine.record("anna", [user_msg("Lovely weather today, isn't it?", at(9)),
                           user_msg("As I mentioned, my dog Biscuit is a golden retriever.", at(9))])
    report = engine.consolidate("anna")
    [known] = observations(engine)
    assert known.id == first.id and known.content == "Anna has a golden retriever called Biscuit."
    assert known.metadata["mentions"] == 2 and len(known.source_ids) == 2
    assert known.updated_at > first.updated_at
    assert report.added == [] and report.merged == [known.content]
    assert not brain.of_kind("judge")  # a sure repeat: nothing asked


def test_fiction_never_becomes_a_fact_about_the_user(engine, brain):
    engine.record("anna", [user_msg("In my novel, I'm a pilot.", at(2))])
    report = engine.consolidate("anna")
    contents = [m.content for m in observations(engine)]
    assert contents == ["Anna is writing a novel."]
    assert report.flagged == ["In Anna's novel, the narrator is a pilot."]
    assert not any("pilot" in c for c in contents)
    # the instruction is in the prompt actually sent
    assert '"reality": "fiction"' in brain.prompts[0].system


def test_who_said_what_and_third_people_are_kept(engine, brain):
    def extract(prompt):
        # only the user's message is numbered; the assistant's line stands before it as context
        assert [(n, s) for n, _, s, _ in prompt.new] == [(1, "Anna")]
        assert [s for _, s, _ in prompt.between] == ["assistant"]
        return [obs("Anna's sister Clara lives in Porto.", [1], about="Clara", kind="relation")]
    brain.extract = lambda p: []
    engine.record("anna", [user_msg("How are you?", at(3, 9))])  # earlier turn: context only
    engine.consolidate("anna")
    brain.extract = extract
    engine.record("anna", [assistant_msg("Does your family live nearby?", at(3)),
                           user_msg("My sister Clara lives in Porto.", at(3))])
    report = engine.consolidate("anna")
    assert report.added == ["Anna's sister Clara lives in Porto."]
    [memory] = observations(engine)
    assert memory.metadata["about"] == "Clara" and memory.metadata["said_by"] == "Anna"
    # the earlier turn was given as context, not as a new message
    assert "Anna: How are you?" in brain.prompts[-1].user.split("New messages")[0]


def test_content_is_kept_exactly_in_the_users_language(tmp_path, server, brain, local_embedder):
    text = "小王又开始吃鱼了，不再吃素。Ünïcode CASE 保留 " + "长" * 3000
    brain.extract = lambda p: [obs(text, [1], about="小王")]
    memory = make_engine(tmp_path, server, local_embedder, language="auto")
    try:
        message = "我最近又开始吃鱼了，不再吃素。" + "长" * 3000
        memory.record("xw", [user_msg(message, at(4), name="小王")])
        memory.consolidate("xw")
        [stored] = memory.list("xw", types=["observation"])
        assert stored.content == text  # never lower-cased, never cut
        prompt = brain.prompts[0]
        assert "你负责为一个 AI 助手维护关于用户的长期记忆" in prompt.system  # Chinese prompts chosen
        assert prompt.new[0][3] == message  # the message was sent whole
        assert prompt.new[0][1].startswith("2026年5月4日 周一")
    finally:
        memory.close()


def test_repeat_the_model_calls_new_is_still_merged(engine, brain):
    brain.extract = lambda p: [obs("Anna lives in Lisbon.", [1])]
    engine.record("anna", [user_msg("I live in Lisbon.", at(1))])
    engine.consolidate("anna")
    engine.record("anna", [user_msg("Lisbon is where I live.", at(5))])
    report = engine.consolidate("anna")
    assert report.added == [] and report.merged == ["Anna lives in Lisbon."]
    [memory] = observations(engine)
    assert memory.metadata["mentions"] == 2


def test_unknown_memory_labels_and_junk_items_are_ignored(engine, brain):
    brain.extract = lambda p: [obs("Anna plays the cello.", [1], relation="replaces", memory="M9"),
                               {"content": ""}, "junk", {"content": "Anna sings.", "messages": ["[1]"],
                                                         "relation": "weird", "importance": "high"}]
    engine.record("anna", [user_msg("I play the cello and I sing.", at(1))])
    report = engine.consolidate("anna")
    assert sorted(report.added) == ["Anna plays the cello.", "Anna sings."]
    assert report.expired == []


def test_insights_link_their_sources_and_follow_expiry(tmp_path, server, brain, local_embedder):
    memory = make_engine(tmp_path, server, local_embedder, reflect_every_observations=2)
    try:
        memory.record("anna", [user_msg("I'm vegetarian.", at(1)), user_msg("I play the cello.", at(1))])
        report = memory.consolidate("anna")
        assert report.llm_calls == 2  # one extraction, one reflection (due at 2 observations)
        insights = memory.list("anna", types=["insight"])
        assert {i.content.split(":")[0] for i in insights} == {"Food preferences of Anna", "Life of Anna"}
        obs_by_content = {m.content: m for m in memory.list("anna", types=["observation"])}
        food = next(i for i in insights if i.content.startswith("Food"))
        assert food.source_ids == [obs_by_content["Anna is vegetarian."].id]
        assert all(m.metadata["reflected"] for m in obs_by_content.values())
        # the source expires: the insight is rewritten (same id), never duplicated
        memory.record("anna", [user_msg("I started eating fish again.", at(2, month=6))])
        memory.consolidate("anna")
        assert any(p.kind == "reflect" and p.expired for p in brain.prompts)
        insights = memory.list("anna", types=["insight"], include_expired=False)
        food_now = [i for i in insights if i.content.startswith("Food")]
        assert len(food_now) == 1 and food_now[0].id == food.id
        assert "fish" in food_now[0].content and food_now[0].metadata["revision"] == 2
        assert food_now[0].metadata["previous"] == food.content
        fish = next(m for m in memory.list("anna", types=["observation"]) if "fish" in m.content)
        assert fish.id in food_now[0].source_ids
        # looked at once: not stale again, so no further reflection call without new observations
        calls = len(brain.prompts)
        assert memory.consolidate("anna").llm_calls == 0 and len(brain.prompts) == calls
    finally:
        memory.close()


def test_duplicate_insights_are_merged(tmp_path, server, brain, local_embedder):
    memory = make_engine(tmp_path, server, local_embedder)
    try:
        memory.record("anna", [user_msg("I love jazz.", at(1)), user_msg("Miles Davis is my hero.", at(1))])
        memory.consolidate("anna")
        def label(prompt, word):
            return next(name for name, t in prompt.observations.items() if word in t)
        brain.reflect = lambda p: [
            {"subject": "Music of Anna", "value": "Anna loves jazz.", "sources": [label(p, "jazz")], "update": None},
            {"subject": "Music preferences of Anna", "value": "Anna admires Miles Davis.",
             "sources": [label(p, "Miles")]}]
        memory.reflect("anna")
        first = {i.metadata["subject"]: i for i in memory.list("anna", types=["insight"])}
        assert set(first) == {"Music of Anna", "Music preferences of Anna"}
        memory.record("anna", [user_msg("I go to a jazz concert every month.", at(2))])
        memory.consolidate("anna")

        def merge(prompt):
            keep = next(name for name, t in prompt.insights.items() if t.startswith("Music preferences"))
            other = next(name for name, t in prompt.insights.items() if t.startswith("Music of"))
            return [{"subject": "Music preferences of Anna", "value": "Anna loves jazz and Miles Davis.",
                     "sources": list(prompt.observations), "update": keep, "merge": [other]},
                    # the same subject again in one answer folds into the first
                    {"subject": "music preferences of anna", "value": "Anna goes to a jazz concert every month.",
                     "sources": [label(prompt, "concert")], "update": None}]
        brain.reflect = merge
        report = memory.reflect("anna")
        active = memory.list("anna", types=["insight"], include_expired=False)
        assert len(active) == 1
        assert active[0].id == first["Music preferences of Anna"].id
        gone = memory.get("anna", first["Music of Anna"].id)
        assert gone.status is MemoryStatus.EXPIRED and gone.superseded_by == active[0].id
        assert report.expired == ["Music of Anna: Anna loves jazz."]
    finally:
        memory.close()


def test_reflect_on_demand_without_new_observations_says_so(engine):
    report = engine.reflect("anna")
    assert report.llm_calls == 0 and report.skipped_reason


def test_related_memories_come_from_search_not_a_full_scan(engine, brain):
    brain.extract = lambda p: [obs(f"Anna fact {p.new[0][3]}", [1])]
    for i in range(15):
        engine.record("anna", [user_msg(f"topic{i} detail", at(1))])
        engine.consolidate("anna")
    before = len(brain.of_kind("judge"))
    engine.record("anna", [user_msg("topic3 detail changed completely now", at(2))])
    engine.consolidate("anna")
    judged = brain.of_kind("judge")[before:]
    asked = [old for prompt in judged for _, old, _ in prompt.pairs]
    # it states a change: questions about related memories, at most judge_candidates of them
    assert 0 < len(asked) <= engine.settings.consolidation.judge_candidates
    assert "Anna fact topic3 detail" in asked
    assert all(m.type is MemoryType.OBSERVATION for m in observations(engine))


def test_system_and_tool_messages_alone_need_no_llm_call(engine, brain):
    engine.record("anna", [{"role": "system", "content": "You are a helpful assistant."}])
    report = engine.consolidate("anna")
    assert report.messages == 1 and report.llm_calls == 0 and brain.prompts == []
    assert engine.store.users_with_pending() == []


def test_tool_calls_are_neither_mined_nor_shown_as_context(engine, brain):
    """A tool call is the agent's (docs/procedural.md): consolidation never gets it as a new message
    nor as context, so no tool output becomes an observation about the person."""
    brain.extract = lambda p: []
    engine.record("anna", [user_msg("Is it raining in Leeds?", at(3, 9)),
                           {"tool_call": {"name": "weather", "arguments": {"city": "Leeds"},
                                          "result": "Heavy rain over Leeds, 11 degrees"}, "timestamp": at(3, 9)}])
    engine.consolidate("anna")
    engine.record("anna", [assistant_msg("Yes, take an umbrella.", at(3)), user_msg("Thanks, I will.", at(3))])
    engine.consolidate("anna")
    assert brain.prompts and all("Heavy rain" not in prompt.user for prompt in brain.prompts)
    assert "Is it raining in Leeds?" in brain.prompts[-1].user.split("New messages")[0]
    assert engine.store.pending_messages("anna") == []
