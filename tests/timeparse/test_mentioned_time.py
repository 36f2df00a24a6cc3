"""A recorded turn's own time words become its event range, relative to when it was said."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.timeparse.mentioned_time import mentioned_range

SAID = datetime(2024, 10, 20, 21, 0, tzinfo=timezone.utc)  # a Sunday, after the National Day holiday


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


@pytest.mark.parametrize("text, start, days", [
    ("十月三号我一个人去三岔湖待了一整天，钓到一条草鱼。", _day(2024, 10, 3), 1),
    ("上周六他来杭州，我们谈了一整晚。", _day(2024, 10, 12), 1),
    ("I went to a support group yesterday.", _day(2024, 10, 19), 1),
    ("We're going camping next month.", _day(2024, 11, 1), 30),
    ("去年夏天在青岛的一个音乐节上认识的。", _day(2023, 6, 1), 92),
])
def test_precise_mentions_become_a_range(text, start, days):
    found = mentioned_range(text, SAID)
    assert found is not None
    assert found.start == start
    assert found.end == start + timedelta(days=days)


@pytest.mark.parametrize("text", [
    "我现在最头疼的是我家那只橘猫。",  # no time words
    "今天已经跟老板提了离职。",  # the day it was said: the message time says it already
    "I feel great now.",
    "每周一去游泳，周三练瑜伽。",  # a habit
    "I go running every Saturday morning.",
    "2022年我去过日本。",  # a whole year points at no one event
    "This year has been hard.",
])
def test_no_range_for_habits_broad_spans_or_the_day_itself(text):
    assert mentioned_range(text, SAID) is None


@pytest.mark.parametrize("text, said, start", [
    ("跟小满去大理，10月1号出发，玩六天。", _day(2024, 8, 20), _day(2024, 10, 1)),  # a plan: the coming one
    ("We fly to Rome on 3 June.", _day(2024, 5, 20), _day(2024, 6, 3)),
    ("十月三号我去三岔湖钓鱼了。", _day(2024, 10, 20), _day(2024, 10, 3)),  # just past: this year's
    ("We met in August.", _day(2025, 1, 10), _day(2024, 8, 1)),
    ("去年夏天在青岛认识的。", _day(2025, 1, 10), _day(2024, 6, 1)),  # anchored words are never moved
    ("2023年10月1号我们去了北京。", _day(2024, 8, 20), _day(2023, 10, 1)),
])
def test_a_date_without_a_year_is_its_nearer_occurrence(text, said, start):
    found = mentioned_range(text, said)
    assert found is not None and found.start == start


def test_naive_timestamps_keep_their_wall_clock():
    found = mentioned_range("I went hiking yesterday.", datetime(2024, 10, 20, 9, 0))
    assert found is not None and found.start == datetime(2024, 10, 19)


@pytest.fixture
def memory(tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as memory:
        yield memory


def test_a_turn_said_days_later_is_found_by_the_time_it_mentions(memory):
    memory.record("wen", [
        {"role": "user", "content": "上个月我去千岛湖钓鱼了，一条也没钓到。", "timestamp": SAID},
        {"role": "assistant", "content": "下次会好的。", "timestamp": SAID + timedelta(seconds=5)},
        {"role": "user", "content": "十月三号我又去三岔湖钓鱼了，钓到一条草鱼。",
         "timestamp": SAID + timedelta(seconds=10)},
    ], session_id="s1")
    # Three candidates: fusion scales each channel from 0 to 1 over them, so which one is first rests on
    # the order of two cosines. "国庆假期我去哪里钓鱼了？" put them 0.012 apart and int8 and float32
    # vectors disagreed on the order; for this question the holiday's turn leads by 0.022 (float32) and
    # 0.052 (int8), and ranks first with a final score 2.2 times the September one's.
    result = memory.retrieve("wen", "国庆假期钓到鱼了吗？", now=datetime(2024, 11, 5, tzinfo=timezone.utc))
    by_place = {("三岔湖" if "三岔湖" in m.memory.content else "千岛湖" if "千岛湖" in m.memory.content else "-"): m
                for m in result.memories}
    holiday, september = by_place["三岔湖"], by_place["千岛湖"]
    assert result.memories[0] is holiday
    assert holiday.scores.get("time_match") == 1.0
    assert september.scores.get("time_match", 0.0) < 1.0  # at most the fuzzy margin: 30 September
    assert holiday.memory.event_start == _day(2024, 10, 3)
    assert september.memory.event_start == _day(2024, 9, 1)
    assert holiday.memory.metadata["event_time_source"] == "mentioned"
    # the context dates the turn by when it was said and resolves its "十月三号" beside the words
    line = next(line for line in result.context.splitlines() if "三岔湖" in line)
    assert line.startswith("[2024年10月20日 周日] ")
    assert "十月三号（= 2024年10月3日 周四）我又去三岔湖钓鱼了" in line


def test_turns_without_time_words_get_no_event_time(memory):
    memory.record("wen", [{"role": "user", "content": "I love green tea.", "timestamp": SAID}])
    stored = memory.list("wen")[0]
    assert stored.event_start is None and "event_time_source" not in stored.metadata
