"""Profile values read from an observation's own words when the model proposed none (`profile_cues`)."""

from __future__ import annotations

import pytest

from memoryscope_plugins.person.profile_cues import negated, stated

STATED = [
    ("Priya moved to Glasgow.", "Big change: we moved to Glasgow last month.", "en", [("home", "Glasgow")]),
    ("Priya lives in Bristol.", "I live in Bristol with my partner Dev.", "en", [("home", "Bristol")]),
    ("Priya's partner Dev.", "I live in Bristol with my partner Dev.", "en", [("family", "Dev (partner)")]),
    ("Priya adopted a cat named Miso.", "We adopted a cat called Miso last week.", "en", [("pets", "Miso")]),
    ("Priya works as a nurse at St Mary's.", "I work as a nurse at St Mary's.", "en", [("work", "nurse")]),
    ("Priya is vegetarian now.", "I'm vegetarian now.", "en", [("diet", "vegetarian")]),
    ("孙悦住在南京。", "我住在南京，在一家出版社当编辑。", "zh", [("home", "南京")]),
    ("出版社当编辑。", "我住在南京，在一家出版社当编辑。", "zh", [("work", "出版社当编辑")]),
    ("孙悦在一家游戏公司做策划。", "我上个月跳槽了，现在在一家游戏公司做策划。", "zh", [("work", "游戏公司做策划")]),
    ("孙悦养了一只猫叫年糕。", "我养了一只猫，叫年糕。", "zh", [("pets", "年糕")]),
    ("孙悦搬到了杭州。", "我上个月搬到了杭州。", "zh", [("home", "杭州")]),
    ("孙悦的老公是李明。", "我老公叫李明。", "zh", [("family", "李明（老公）")]),
    # the observation says only where (the shared model's answer in zh_change); the user said what
    ("孙悦在深圳工作。", "我在深圳做程序员，平时不喝酒。", "zh", [("work", "深圳做程序员")]),
    ("孙悦在深圳工作。", "我在深圳工作，平时不喝酒。", "zh", [("work", "在深圳工作")]),
    ("孙悦在深圳工作。", "我妹妹在深圳做护士，我也在深圳工作。", "zh", [("work", "在深圳工作")]),
    ("孙悦在深圳工作。", "我以前在北京做程序员。", "zh", [("work", "在深圳工作")]),
    ("Priya teaches cooking classes now.", "Big news: I quit the bakery and now I teach cooking classes.", "en",
     [("work", "teaches cooking classes")]),
    ("Priya doesn't drink alcohol.", "I don't drink alcohol.", "en", [("diet", "doesn't drink alcohol")]),
    ("孙悦平时不喝酒。", "我在深圳做程序员，平时不喝酒。", "zh", [("diet", "不喝酒")]),
    ("孙悦开始喝红酒。", "最近开始喝红酒了，周末会喝一杯。", "zh", [("diet", "喝红酒")]),
    ("孙悦吃素。", "我现在吃素。", "zh", [("diet", "吃素")]),
    ("孙悦戒了咖啡。", "上个月我戒了咖啡。", "zh", [("diet", "戒了咖啡")]),
    ("孙悦的表妹晓雯住在成都。", "我表妹晓雯住在成都。", "zh", [("family", "晓雯（表妹）")]),
    # the shared model's observations of zh_memory_dev, and the user's words they came from
    ("孙悦是成都人，武侯区一所初中教物理，教了整整二十年了。", "成都人，在武侯区一所初中教物理，教了二十年了。", "zh",
     [("hometown", "成都"), ("work", "武侯区一所初中教物理")]),
    ("孙悦开始吃素是为了减肥。", "我开始吃素是为了减肥。", "zh", [("diet", "吃素")]),
    ("孙悦家里也有个考生，闺女陈思语今年高三。", "我家里也有个考生，闺女陈思语今年高三。", "zh",
     [("family", "陈思语（闺女）")]),
    ("孙悦的弟弟林晓东也在家。", "弟弟林晓东也在家。", "zh", [("family", "林晓东（弟弟）")]),
    ("孙悦来自温州。", "我来自温州。", "zh", [("hometown", "温州")]),
    ("孙悦的老家在眉山。", "我老家在眉山，每年春节回去。", "zh", [("hometown", "眉山")]),
    ("孙悦的老家在眉山。", "老家在眉山，每年春节回去。", "zh", [("hometown", "眉山")]),  # a bare 老家 in her words
    # her boyfriend's job is not hers: only he is hers
    ("孙悦的男朋友周杰在上海做后端程序员。", "他叫周杰，我们都叫他阿杰，在上海做后端程序员，我们一直是异地。", "zh",
     [("family", "周杰（男朋友）")]),
    ("Priya is from Sweden.", "I'm from Sweden.", "en", [("hometown", "Sweden")]),
    ("Priya moved from Sweden four years ago.", "I moved from Sweden four years ago.", "en",
     [("hometown", "Sweden")]),
    ("Priya grew up in Leeds.", "I grew up in Leeds.", "en", [("hometown", "Leeds")]),
]

NOT_THE_USER = [
    ("Ben's sister Hannah got a job as a vet in Galway.", "Ben's sister Hannah got a job as a vet in Galway.", "en"),
    ("Priya's sister lives in Paris.", "My sister lives in Paris.", "en"),
    ("Priya's boss works at Google.", "My boss works at Google.", "en"),
    ("Priya likes Glasgow.", "Glasgow is lovely.", "en"),
    ("孙悦的妹妹在医院当护士。", "我妹妹在医院当护士。", "zh"),
    ("孙悦的朋友住在上海。", "我的朋友住在上海。", "zh"),
    ("孙悦喜欢南京。", "南京挺好的。", "zh"),
    ("Priya's son teaches math.", "My son teaches math.", "en"),
    ("Priya teaches her son to swim.", "I teach my son to swim.", "en"),
    ("Priya's sister doesn't eat meat.", "My sister doesn't eat meat.", "en"),
    ("孙悦吃了一碗面。", "我中午吃了一碗面。", "zh"),  # a meal, not a habit
    ("孙悦吃火锅。", "晚上吃火锅。", "zh"),
    ("孙悦的妹妹不喝酒。", "我妹妹不喝酒。", "zh"),  # neither her diet nor a sister named 不喝酒
    ("孙悦的妹妹今天在上海。", "我妹妹今天在上海。", "zh"),
    # a clause without a subject after one about someone else is theirs (zh_memory_dev, zh-conv-1)
    ("周杰在上海做后端程序员。", "他叫周杰，我们都叫他阿杰，在上海做后端程序员，我们一直是异地。", "zh"),
    ("孙悦的闺蜜小满在杭州做小学老师。", "我闺蜜小满说国庆陪我出去散心，她是我大学室友，现在在杭州做小学老师。", "zh"),
    ("孙悦是外地人。", "我是外地人。", "zh"),  # what kind of person, not where from
    ("孙悦是个好人。", "我是个好人。", "zh"),
    ("孙悦在家教孩子写作业。", "我在家教孩子写作业。", "zh"),  # teaching, but not a job
    ("她妈妈刘芳是护士。", "她妈妈刘芳是华西医院的护士。", "zh"),
    ("孙悦的爸爸老家在眉山。", "我爸老家在眉山。", "zh"),  # his, not hers
    ("Priya's sister is from Spain.", "My sister is from Spain.", "en"),
    ("Priya's sister moved from Spain.", "My sister moved from Spain.", "en"),
]


@pytest.mark.parametrize("observation, message, language, expected", STATED)
def test_a_value_the_observation_states_about_the_user(observation, message, language, expected):
    user = "孙悦" if language == "zh" else "Priya"
    assert stated(observation, message, user, language) == expected


@pytest.mark.parametrize("observation, message, language", NOT_THE_USER)
def test_nothing_about_someone_else_or_without_a_cue(observation, message, language):
    user = "孙悦" if language == "zh" else "Priya"
    assert stated(observation, message, user, language) == []


def test_a_value_only_the_message_holds_is_not_the_observations():
    """The message says where the user lives, the observation is about the cat: no home on it."""
    assert stated("Priya adopted a cat named Miso.", "I live in Bristol and we adopted a cat named Miso.",
                  "Priya", "en") == [("pets", "Miso")]
    assert stated("孙悦养了一只猫叫年糕。", "我住在南京，养了一只猫叫年糕。", "孙悦", "zh") == [("pets", "年糕")]


def test_without_a_name_the_first_person_of_the_message_still_counts():
    assert stated("Lives in Leeds.", "I live in Leeds.", None, "en") == [("home", "Leeds")]
    assert stated("", "", None, "en") == [] and stated("x" * 10_000, "y" * 10_000, "Priya", "zh") == []


def test_a_value_that_says_the_opposite_is_negated():
    assert negated("不喝酒") and negated("戒了咖啡") and negated("doesn't drink alcohol") and negated("no longer vegan")
    assert not negated("喝红酒") and not negated("vegetarian") and not negated("teaches cooking classes")
