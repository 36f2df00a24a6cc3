"""The context block an answering model reads: today's date, dated lines, relative times resolved,
event times labelled, the turns next to a hit, each memory once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.retrieval.context import format_context, memory_line
from memoryscope_plugins.timeparse.context_times import describe_range, resolved_times, time_mentions
from memoryscope_plugins.types import Memory, MemoryType, ScoredMemory, TimeRange

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # a Monday
NOW = datetime(2023, 10, 23, 9, 0, tzinfo=timezone.utc)


def _turn(content: str, speaker: str = "Caroline", said: datetime = SAID, **kw) -> Memory:
    return Memory(id=kw.pop("id", content[:12]), user_id="u", agent_id="a", content=content, speaker=speaker,
                  created_at=said, **kw)


def _stored_turn(content: str, speaker: str = "Caroline", said: datetime = SAID) -> Memory:
    """A turn as `record` stores it: its relative times resolved in its metadata."""
    mentions = time_mentions(content, said)
    return _turn(content, speaker, said, metadata={"time_mentions": mentions} if mentions else {})


@pytest.mark.parametrize("text, expected", [
    ("I went to a LGBTQ support group yesterday.", [("yesterday", "2023-05-07 Sun")]),
    ("We went camping last Saturday.", [("last Saturday", "2023-05-06 Sat")]),
    ("I painted that lake sunrise last year!", [("last year", "2022")]),
    ("We're going to Paris next month.", [("next month", "June 2023")]),
    ("I talked about it at school last week.", [("last week", "2023-05-01 Mon – 2023-05-07 Sun")]),
    ("Yesterday I hiked, and last Saturday I swam.",
     [("Yesterday", "2023-05-07 Sun"), ("last Saturday", "2023-05-06 Sat")]),
    ("On 3 June 2023 we marry.", []),  # already absolute
    ("We fly to Paris on 3 June.", [("3 June", "2023-06-03 Sat")]),  # yearless: the nearer one, not 2022
    ("I go running every Saturday morning.", []),  # a habit
    ("I feel great today.", []),  # the day it was said: the line's date says it
    ("I love green tea.", []),
])
def test_english_relative_times_resolve_against_when_they_were_said(text, expected):
    assert resolved_times(text, SAID, "en") == expected


@pytest.mark.parametrize("text, expected", [
    ("我昨天去了三岔湖钓鱼。", [("昨天", "2023年5月7日 周日")]),
    ("上周六我们去爬山了。", [("上周六", "2023年5月6日 周六")]),
    ("去年我在杭州工作。", [("去年", "2022年")]),
    ("下个月我要去北京。", [("下个月", "2023年6月")]),
    ("国庆去大理，10月1号出发。", [("国庆", "2023年10月1日 – 10月7日"), ("10月1号", "2023年10月1日 周日")]),
    ("每周一去游泳。", []),
    ("2022年我去过日本。", []),
])
def test_chinese_relative_times_resolve_against_when_they_were_said(text, expected):
    assert resolved_times(text, SAID, "zh") == expected


def test_a_turn_line_shows_the_day_said_the_speaker_and_the_resolved_time():
    line = memory_line(_stored_turn("I went to a LGBTQ support group yesterday and it was powerful."), "en")
    assert line == "[2023-05-08 Mon] Caroline: I went to a LGBTQ support group yesterday (= 2023-05-07 Sun) and " \
                   "it was powerful."
    line = memory_line(_stored_turn("我昨天去了三岔湖，上周六去了千岛湖。", speaker="王伟"), "zh")
    assert line == "[2023年5月8日 周一] 王伟: 我昨天（= 2023年5月7日 周日）去了三岔湖，" \
                   "上周六（= 2023年5月6日 周六）去了千岛湖。"
    # a stored expression the words no longer contain is noted at the end
    moved = _turn("We met at the lake.", metadata={"time_mentions": [
        {"text": "last Saturday", "start": "2023-05-06T00:00:00+00:00", "end": "2023-05-07T00:00:00+00:00"}]})
    assert memory_line(moved, "en") == "[2023-05-08 Mon] Caroline: We met at the lake. (last Saturday = 2023-05-06 Sat)"
    assert memory_line(_stored_turn("I went there yesterday."), "en", resolve_times=False) == \
        "[2023-05-08 Mon] Caroline: I went there yesterday."


def test_an_observation_shows_when_it_was_said_and_its_event_time_labelled():
    observation = Memory(id="o", user_id="u", agent_id="a", content="Caroline went to a support group.",
                         type=MemoryType.OBSERVATION, created_at=SAID,
                         event_start=datetime(2023, 5, 7, tzinfo=timezone.utc),
                         event_end=datetime(2023, 5, 8, tzinfo=timezone.utc))
    assert memory_line(observation, "en") == \
        "[2023-05-08 Mon] Caroline went to a support group. (event: 2023-05-07 Sun)"
    assert memory_line(observation, "zh") == \
        "[2023年5月8日 周一] Caroline went to a support group.（事件时间：2023年5月7日 周日）"
    observation.event_start = datetime(2023, 5, 8, tzinfo=timezone.utc)  # the same day: said once
    observation.event_end = datetime(2023, 5, 9, tzinfo=timezone.utc)
    assert memory_line(observation, "en") == "[2023-05-08 Mon] Caroline went to a support group."


def test_the_block_starts_with_today_and_lists_each_memory_once_in_the_order_said():
    later = _stored_turn("Melanie painted a sunset.", speaker="Melanie", said=SAID + timedelta(days=3))
    first = _stored_turn("I went to a support group yesterday.")
    block = format_context([ScoredMemory(later, 1.0), ScoredMemory(first, 0.5), first], "en", now=NOW)
    assert block.splitlines() == [
        "Today is 2023-10-23 Mon. Relevant memories, oldest first ([date] = when it was said):",
        "[2023-05-08 Mon] Caroline: I went to a support group yesterday (= 2023-05-07 Sun).",
        "[2023-05-11 Thu] Melanie: Melanie painted a sunset.",
    ]
    zh = format_context([first], "zh", now=NOW)
    assert zh.splitlines()[0] == "今天是2023年10月23日 周一。相关记忆（按时间先后，[日期] 为说这句话的日期）："
    assert format_context([first], "en").splitlines()[0] == \
        "Relevant memories, oldest first ([date] = when it was said):"
    assert format_context([], "en", now=NOW) == ""


def test_an_older_turn_without_stored_times_is_resolved_when_it_had_a_mentioned_time():
    legacy = _turn("I went to a support group yesterday.", metadata={"event_time_source": "mentioned"})
    assert memory_line(legacy, "en").endswith("yesterday (= 2023-05-07 Sun).")


@pytest.mark.parametrize("stored", ["yesterday", [{"text": "yesterday"}], [{"text": "x", "start": "soon", "end": 1}],
                                    [None, 3], [{"text": "x", "start": "2023-05-08", "end": "2023-05-07"}]])
def test_malformed_stored_times_are_left_out(stored):
    turn = _turn("I went there yesterday.", metadata={"time_mentions": stored})
    assert memory_line(turn, "en") == "[2023-05-08 Mon] Caroline: I went there yesterday."


def test_ranges_read_as_a_reader_names_them():
    utc = timezone.utc
    assert describe_range(TimeRange(datetime(2022, 1, 1, tzinfo=utc), datetime(2023, 1, 1, tzinfo=utc))) == "2022"
    assert describe_range(TimeRange(datetime(2023, 12, 1, tzinfo=utc), datetime(2024, 1, 1, tzinfo=utc)), "zh") \
        == "2023年12月"
    assert describe_range(TimeRange(datetime(2023, 5, 6, tzinfo=utc), datetime(2023, 5, 8, tzinfo=utc))) == \
        "2023-05-06 Sat – 2023-05-07 Sun"


# -- through the engine ---------------------------------------------------------------------------

def _session(engine, user: str = "mel") -> None:
    turns = [
        ("Caroline", "Is this your own painting? It looks great."),
        ("Melanie", "Yeah, I painted that lake sunrise last year! It's special to me."),
        ("Caroline", "Wow, the colours really blend nicely."),
        ("Melanie", "Thanks! By the way, my kids started swimming lessons."),
    ]
    engine.record(user, [{"role": "user" if who == "Caroline" else "assistant", "name": who, "content": text,
                          "timestamp": SAID + timedelta(seconds=i)} for i, (who, text) in enumerate(turns)],
                  session_id="s1")


def test_record_stores_the_resolved_times_and_retrieve_shows_them_with_today(engine):
    _session(engine)
    stored = {m.content: m for m in engine.list("mel")}
    assert stored["Yeah, I painted that lake sunrise last year! It's special to me."].metadata["time_mentions"] == [
        {"text": "last year", "start": "2022-01-01T00:00:00+00:00", "end": "2023-01-01T00:00:00+00:00"}]
    assert "time_mentions" not in stored["Wow, the colours really blend nicely."].metadata
    result = engine.retrieve("mel", "When did Melanie paint the lake sunrise?", now=NOW, top_k=1)
    lines = result.context.splitlines()
    assert lines[0].startswith("Today is 2023-10-23 Mon.")
    assert "[2023-05-08 Mon] Melanie: Yeah, I painted that lake sunrise last year (= 2022)! It's special to me." \
        in lines


def test_a_hit_brings_the_turn_it_answers_and_the_reply_it_got_into_the_context_only(engine):
    _session(engine)
    result = engine.retrieve("mel", "lake sunrise painting", now=NOW, top_k=1)
    assert [m.memory.content for m in result.memories] == [
        "Yeah, I painted that lake sunrise last year! It's special to me."]
    lines = result.context.splitlines()[1:]
    assert lines == [
        "[2023-05-08 Mon] Caroline: Is this your own painting? It looks great.",
        "[2023-05-08 Mon] Melanie: Yeah, I painted that lake sunrise last year (= 2022)! It's special to me.",
        "[2023-05-08 Mon] Caroline: Wow, the colours really blend nicely.",
    ]
    assert [m.content for m in result.neighbours] == [
        "Is this your own painting? It looks great.", "Wow, the colours really blend nicely."]


def test_neighbours_are_never_repeated_and_can_be_turned_off(engine):
    _session(engine)
    result = engine.retrieve("mel", "painting colours sunrise", now=NOW, top_k=4)
    lines = result.context.splitlines()[1:]
    assert len(lines) == len(set(lines)) == 4  # every turn once, hits and neighbours alike
    assert result.neighbours == []  # all four are hits already
    engine.settings.retrieval = engine.settings.retrieval.model_copy(update={"context_neighbours": 0})
    alone = engine.retrieve("mel", "lake sunrise painting", now=NOW, top_k=1)
    assert alone.neighbours == [] and len(alone.context.splitlines()) == 2
    engine.settings.retrieval = engine.settings.retrieval.model_copy(
        update={"context_neighbours": 5, "context_next_turn": False})
    before_only = engine.retrieve("mel", "lake sunrise painting", now=NOW, top_k=1)
    assert [m.content for m in before_only.neighbours] == ["Is this your own painting? It looks great."]


def test_the_injected_block_is_rendered_by_the_engine_the_same_for_adapters_and_bench():
    from memoryscope_plugins.adapters._common import DEFAULT_TEMPLATE, MemoryConfig
    from memoryscope_plugins.retrieval import injection
    from memoryscope_plugins.types import RetrievalResult

    context = format_context([_stored_turn("I went to a LGBTQ support group yesterday.")], "en", now=NOW)
    block = injection.render_block(context)
    assert block == f"<long_term_memory>\n{context}\n</long_term_memory>"
    assert DEFAULT_TEMPLATE is injection.DEFAULT_TEMPLATE and MemoryConfig().render(context) == block
    custom = "Memories:\n{context}\n--"
    assert MemoryConfig(template=custom).render(context) == injection.render_block(context, custom) \
        == f"Memories:\n{context}\n--"
    assert injection.render_block("  \n") == "" and MemoryConfig().render("") == ""
    found = RetrievalResult(query="q", memories=[ScoredMemory(memory=_turn("x"), score=1.0)], context=context)
    assert injection.result_block(found) == block
    assert injection.result_block(RetrievalResult(query="q", memories=[], context=context)) == ""
    assert injection.is_block(block) and not injection.is_block(context)
    with pytest.raises(ValueError, match="context"):
        MemoryConfig(template="no placeholder")


def test_a_question_about_the_present_gets_a_header_saying_the_newest_line_holds():
    first = _stored_turn("I live in Chengdu.")
    block = format_context([first], "en", now=NOW, present=True)
    assert block.splitlines()[0] == (
        "Today is 2023-10-23 Mon. Relevant memories, oldest first ([date] = when it was said; on the same subject "
        "a later line replaces an earlier one, so the newest is what holds now):")
    zh = format_context([first], "zh", now=NOW, present=True)
    assert zh.splitlines()[0] == ("今天是2023年10月23日 周一。相关记忆（按时间先后，[日期] 为说这句话的日期；"
                                  "同一件事以后面的为准，最新的一条就是现在的情况）：")
    assert format_context([], "zh", now=NOW, present=True) == ""


@pytest.mark.parametrize("query, language, present", [
    ("Where does Melanie live now?", "en", True),
    ("他现在住在哪里？", "zh", True),
    ("Where did Melanie live in 2022?", "en", False),
    ("他以前住在哪里？", "zh", False),
])
def test_retrieve_says_the_newest_holds_only_when_the_question_asks_about_now(engine, query, language, present):
    engine.record("mover", [
        {"role": "user", "name": "Melanie", "content": "I live in Chengdu with my parents. 我住在成都。",
         "timestamp": SAID},
        {"role": "user", "name": "Melanie", "content": "I moved out: I live in Hangzhou now. 我搬到杭州住了。",
         "timestamp": SAID + timedelta(days=40)},
    ], session_id="s1")
    result = engine.retrieve("mover", query, now=NOW, language=language, min_relevance=-1)
    assert result.memories
    head = result.context.splitlines()[0]
    marker = "the newest is what holds now" if language == "en" else "最新的一条就是现在的情况"
    assert (marker in head) is present
    plain = "oldest first ([date] = when it was said):" if language == "en" else "[日期] 为说这句话的日期）："
    assert head.endswith(plain) is not present
