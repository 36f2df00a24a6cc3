"""Cue checks on a small model's observations, and which time words belong to which observation."""

from __future__ import annotations

import pytest

from memoryscope_plugins.consolidation.cues import corrected, corrects_itself, framing, last_said, small_talk
from memoryscope_plugins.consolidation.judge import says_again
from memoryscope_plugins.consolidation.time_scope import clauses, is_state, time_scope
from memoryscope_plugins.storage.text_analysis import analyse


def names(user: str) -> frozenset[str]:
    return frozenset(analyse(f"{user} said 说"))


@pytest.mark.parametrize("content, user, expected", [
    ("Oskar says the weather is nice today.", "Oskar", True),
    ("Oskar said goodbye and wished a great day.", "Oskar", True),
    ("小美说今天天气真好。", "小美", True),
    ("小美说拜拜。", "小美", True),
    ("Oskar has a golden retriever called Biscuit.", "Oskar", False),
    ("Oskar likes rainy days for reading.", "Oskar", False),
    ("小美养了一只柯基。", "小美", False),
])
def test_small_talk(content, user, expected):
    assert small_talk(content, names(user)) is expected


LUCIA = "In my new book the detective is a retired opera singer who lives on a houseboat in Amsterdam."
CASTLE = ("Haha. If I were a millionaire I'd buy a castle in Scotland. "
          "For real though, I live in Valencia with my husband.")


@pytest.mark.parametrize("user, message, content, expected", [
    ("Lucía", LUCIA, "Lucía's new book is about a retired opera singer who lives on a houseboat.", "made_up"),
    ("Lucía", LUCIA, "Lucía is writing a new book.", "real"),
    ("Lucía", CASTLE, "Lucía would buy a castle in Scotland.", "made_up"),
    ("Lucía", CASTLE, "Lucía lives in Valencia with her husband.", "real"),
    ("Ben", "My boss, Mr. Okafor, is obsessed with cycling; he rides to work every day.",
     "Ben rides to work every day.", "someone_else"),
    ("Ben", "My boss, Mr. Okafor, is obsessed with cycling; he rides to work every day.",
     "Mr. Okafor rides to work every day.", "model"),
    ("Ben", "My sister and I went to Paris last week.", "Ben went to Paris with his sister.", "model"),
    ("王磊", "我妹妹王芳在广州读研究生，学的是建筑。", "王磊在广州读研究生。", "someone_else"),
    ("王磊", "我妹妹王芳在广州读研究生，学的是建筑。", "王磊的妹妹王芳在广州读研究生。", "model"),
    ("赵敏", "假如我中了彩票，我就去冰岛看极光，哈哈。", "赵敏会去冰岛看极光。", "made_up"),
    ("林晓", "我在写一本武侠小说。小说里的主角是一个会飞的厨师。", "林晓在写一本武侠小说。", "real"),
    ("林晓", "我在写一本武侠小说。小说里的主角是一个会飞的厨师。", "林晓小说里的主角是一个会飞的厨师。", "made_up"),
    ("Anna", "I moved to Porto last year.", "Anna moved to Porto.", "model"),
    ("Anna", "My brother works as a night nurse.", "Anna said: My brother works as a night nurse.", "model"),
    ("Anna", "My brother works as a night nurse.", 'Anna said: "I work as a night nurse."', "someone_else"),
])
def test_framing_of_the_clause_an_observation_comes_from(user, message, content, expected):
    assert framing(content, message, user, names(user)) == expected


def test_corrections_and_repeats_are_read_from_the_message():
    assert corrects_itself("Sorry, actually it's Tuesday, not Monday. Tuesday evenings.")
    assert corrects_itself("我们组的周会是每周三上午，哦不对，是每周四上午。")
    assert not corrects_itself("My piano lessons are on Monday evenings.")
    assert last_said({"tuesday"}, {"monday"}, "Sorry, actually it's Tuesday, not Monday. Tuesday evenings.") == "a"
    assert last_said({"周三"}, {"周四"}, "周会是每周三上午，哦不对，是每周四上午。") == "b"
    assert says_again("Hey again. As I mentioned, my dog Biscuit is a golden retriever.")
    assert says_again("我之前说过，团子是我的柯基。")
    assert not says_again("I mentioned it to my boss.")


@pytest.mark.parametrize("observation, message, expected", [
    # the shared model's answer in dev_zh_third_party_suggestion_correction: the value before the correction
    ("王磊的组的周会是每周三上午。", "对了，我们组的周会是每周三上午，哦不对，是每周四上午。",
     "王磊的组的周会是每周四上午。"),
    ("Anna meets Bo at 5.", "We meet at 5, sorry, I mean 6.", "Anna meets Bo at 6."),
    ("Anna's exam is in May.", "My exam is in May, no wait, sorry, in June.", "Anna's exam is in June."),
    ("孙悦十月去日本。", "我十月去日本，说错了，是十一月。", "孙悦十一月去日本。"),
])
def test_a_value_corrected_within_the_message_is_the_one_meant(observation, message, expected):
    assert corrected(observation, message) == expected


@pytest.mark.parametrize("observation, message", [
    ("Ines has piano lessons on Monday evenings.", "Sorry, actually it's Tuesday, not Monday. Tuesday evenings."),
    ("Anna runs on Mondays.", "I run on Mondays, actually also on Fridays."),  # one more, not another
    ("安娜每周一跑步。", "我每周一跑步，其实是周三也跑。"),
    ("Anna runs on Mondays.", "I run on Mondays, actually on Fridays and Sundays."),  # which one?
    ("Anna meets Bo at 6.", "We meet at 5, sorry, I mean 6."),  # already the one meant
    ("Anna meets Bo at 5.", "We meet at 5."),  # no correction
    ("Anna meets Bo at 5 on Monday.", "Sorry, we meet at 6 on Tuesday."),  # the old values said after the cue
])
def test_nothing_else_is_changed(observation, message):
    assert corrected(observation, message) == observation


def test_clauses_keep_a_fronted_time_with_its_clause():
    assert clauses("Hi, I'm Tom. I moved to Hangzhou last month and I work as a nurse.") == \
        ["Hi", "I'm Tom", "I moved to Hangzhou last month", "I work as a nurse"]
    assert clauses("Last week, on Wednesday, I went to Porto.") == ["Last week, on Wednesday I went to Porto"]
    assert clauses("我上个月搬到杭州，在儿童医院当护士。") == ["我上个月搬到杭州", "在儿童医院当护士"]


@pytest.mark.parametrize("content, kind, expected", [
    ("Tom works as a nurse at a children's hospital.", "fact", True),
    ("Tom lives in Hangzhou.", "fact", True),
    ("Tom moved to Hangzhou.", "fact", False),
    ("Kwame will work as a logistics manager.", "fact", False),
    ("Tom works as a nurse.", "event", False),
    ("汤汤在一家儿童医院当护士。", "fact", True),
    ("汤汤开始在医院当护士。", "fact", False),
])
def test_states_and_events(content, kind, expected):
    assert is_state(content, kind) is expected


def test_time_words_belong_to_their_own_clause():
    message = "Hi, I'm Tom. I moved to Hangzhou last month and I work as a nurse at a children's hospital."
    tom = names("Tom")
    assert time_scope("Tom moved to Hangzhou.", "event", message, "last month", tom).expression == "last month"
    assert time_scope("Tom works as a nurse.", "fact", message, "last month", tom).expression is None
    job = time_scope("Tom works as a nurse.", "fact", message, None, tom)
    assert job.state and "last month" not in job.expression


def test_a_message_that_says_it_repeats_itself_lowers_the_bar_for_a_repeat():
    from types import SimpleNamespace

    from memoryscope_plugins.consolidation.judge import compare
    cfg = SimpleNamespace(judge_min_similarity=0.5)
    new, old = "Oskar's dog Biscuit is a golden retriever.", "Oskar has a golden retriever called Biscuit."
    said = "Hey again. As I mentioned, my dog Biscuit is a golden retriever."
    assert compare(new, old, 0.6, names("Oskar"), cfg, said) == "repeat"
    assert compare(new, old, 0.6, names("Oskar"), cfg, "My dog Biscuit is a golden retriever.") != "repeat"
    # a change is never a repeat, whatever the message says
    assert compare("Oskar's dog Biscuit is now a therapy dog.", old, 0.6, names("Oskar"), cfg, said) != "repeat"


@pytest.mark.parametrize("content, message, reply, expected", [
    ("Biscuit is a great name!", "Morning! I have a golden retriever called Biscuit.", "Aw, Biscuit is a great name!",
     True),
    ("祝出差顺利！", "下个月我要去新加坡出差。", "祝出差顺利！", True),
    ("Oskar has a golden retriever called Biscuit.", "Morning! I have a golden retriever called Biscuit.",
     "Aw, Biscuit is a great name!", False),
    # the reply repeats the fact
    ("李娜对芒果过敏。", "请记住：我对芒果过敏。", "好的，我记住了，你对芒果过敏。", False),
    ("Biscuit is a great name!", "Morning! I have a golden retriever called Biscuit.", None, False),
])
def test_an_observation_copied_from_the_assistants_reply(content, message, reply, expected):
    from memoryscope_plugins.consolidation.wording import copies_the_reply
    assert copies_the_reply(content, message, reply, names("Oskar")) is expected
