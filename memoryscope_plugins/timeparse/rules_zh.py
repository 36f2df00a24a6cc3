"""Chinese time rules. Patterns avoid \\b (CJK characters count as word characters) and use lookarounds."""

from __future__ import annotations

import re
from datetime import date, timedelta

from .calendar_math import (
    Context,
    DaySpan,
    Rule,
    Span,
    day_span,
    hours_span,
    month_days,
    month_part,
    past_window,
    pick_occurrence,
    recent_day_of_month,
    recent_month_day,
    safe_date,
    season_days,
    season_of_today,
    shift_month,
    to_span,
    unit_ago,
    week_days,
    weekday_in_week,
    weekday_on_or_before,
    weekend_days,
    year_days,
)
from .festivals import festival_span
from .number_words import ZH_NUMBER_PATTERN, zh_digit_string, zh_number

_YEAR_WORDS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2, "大后年": 3}
_WEEK_WORDS = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
_MONTH_WORDS = {
    "上上个月": -2, "上个月": -1, "上月": -1, "这个月": 0, "这月": 0, "本月": 0,
    "下个月": 1, "下月": 1, "下下个月": 2,
}
_DAY_WORDS = {
    "大大前天": -4, "大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "今天": 0, "今日": 0,
    "明天": 1, "明日": 1, "后天": 2, "大后天": 3,
}
_WEEKDAY_CHARS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6,
                  "1": 0, "2": 1, "3": 2, "4": 3, "5": 4, "6": 5, "7": 6}
_SEASONS = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}
_UNITS = {
    "小时": "hour", "个小时": "hour", "钟头": "hour", "个钟头": "hour", "分钟": "minute",
    "天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week", "礼拜": "week",
    "个礼拜": "week", "个月": "month", "年": "year",
}
# festival names -> the festival they name (the time rules date them; the ledger knows them as topics)
FESTIVALS = {
    "春节": "spring_festival", "过年": "spring_festival", "除夕": "lunar_new_year_eve",
    "大年三十": "lunar_new_year_eve", "大年初一": "lunar_new_year_day", "正月初一": "lunar_new_year_day",
    "元宵节": "lantern", "元旦": "new_year_day", "情人节": "valentine", "妇女节": "womens_day",
    "三八节": "womens_day", "清明节": "qingming", "清明": "qingming", "劳动节": "labour_day",
    "五一": "labour_day", "端午节": "dragon_boat", "端午": "dragon_boat", "儿童节": "childrens_day",
    "七夕节": "qixi", "七夕": "qixi", "中秋节": "mid_autumn", "中秋": "mid_autumn",
    "国庆节": "national_day", "国庆": "national_day", "十一长假": "national_day", "十一假期": "national_day",
    "重阳节": "double_ninth", "万圣节": "halloween", "感恩节": "thanksgiving", "平安夜": "christmas_eve",
    "圣诞节": "christmas", "圣诞": "christmas", "双十一": "singles_day", "双11": "singles_day",
    "光棍节": "singles_day", "母亲节": "mothers_day", "父亲节": "fathers_day", "复活节": "easter",
    "教师节": "teachers_day", "跨年": "new_year_eve",
}
DAY_PART_WORDS = {
    "早上": "morning", "早晨": "morning", "清晨": "morning", "上午": "morning", "早": "morning", "晨": "morning",
    "中午": "noon", "下午": "afternoon", "傍晚": "dusk", "晚上": "evening", "晚": "evening",
    "夜里": "night", "夜间": "night", "夜晚": "night", "夜": "night", "半夜": "midnight", "深夜": "midnight",
    "凌晨": "early_morning",
}

NUM = ZH_NUMBER_PATTERN
_MONTH_NUM = r"(?:1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_DAY_NUM = r"(?:3[01]|[12]\d|0?[1-9]|[一二]?十[一二三四五六七八九]?|三十一?|[一二三四五六七八九])"
_YEAR_DIGITS = r"(?:\d{4}|[〇零○一二三四五六七八九]{4})"
# An optional year before a month, season or festival: "2023年", "去年", "今年的".
_YEAR_PREFIX = (
    rf"(?:(?P<yrel>大前年|(?<!过)前年|(?<!过)去年|今年|明年|大后年|后年)|(?P<y>{_YEAR_DIGITS})\s*年|"
    r"(?<!\d)(?P<y2>\d{2})\s*年)?\s*的?\s*"
)


def _prefix_year(match: re.Match[str], ctx: Context) -> int | None:
    if match["yrel"]:
        return ctx.today.year + _YEAR_WORDS[match["yrel"]]
    if match["y"]:
        return zh_digit_string(match["y"])
    if match["y2"]:
        # why: "24年12月" is 2024; a two-digit year more than 10 years ahead is read as 19xx ("98年")
        year = 2000 + int(match["y2"])
        return year if year <= ctx.today.year + 10 else year - 100
    return None


def _span_or_none(days: DaySpan | None) -> Span | None:
    return to_span(*days) if days else None


def _month_part_key(suffix: str | None) -> str | None:
    if not suffix:
        return None
    if suffix in ("初", "上旬"):
        return "early"
    if suffix in ("中", "中旬"):
        return "mid"
    return "late"


# --- resolvers -------------------------------------------------------------------------------


def _full_date(match: re.Match[str], ctx: Context) -> Span | None:
    """"2023年5月8日", "五月八号", "去年5月8日"; without a year, the latest such date not in the future."""
    month, day = zh_number(match["m"]), zh_number(match["d"])
    if month is None or day is None:
        return None
    year = _prefix_year(match, ctx)
    found = safe_date(year, month, day) if year else recent_month_day(ctx.today, month, day)
    return day_span(found) if found else None


def _date_range(match: re.Match[str], ctx: Context) -> Span | None:
    """"2023年1月1日到3日", "5月1日至5月5日": [first day, day after the last)."""
    first = _full_date(match, ctx)
    month_end, day_end = zh_number(match["m2"] or match["m"]), zh_number(match["d2"])
    if first is None or first[0] is None or month_end is None or day_end is None:
        return None
    last = safe_date(first[0].year, month_end, day_end)
    if last is None or last < first[0].date():
        return None
    return first[0], day_span(last)[1]


def _some_days(match: re.Match[str], ctx: Context) -> Span | None:
    """"前些天" = like 前几天 (the 7 days before today); "这些天" = like 这几天 (the past 3 days)."""
    if match.group(0).startswith("前"):
        return to_span(ctx.today - timedelta(days=7), ctx.today)
    return past_window(ctx, "day", 3)


def _month(match: re.Match[str], ctx: Context) -> Span | None:
    """"五月" = the latest May that has begun; "去年5月", "2023年5月", "5月初/中旬/底"."""
    month = zh_number(match["m"])
    if month is None or not 1 <= month <= 12:
        return None
    year = _prefix_year(match, ctx)
    if year is None:
        days = pick_occurrence(lambda y: month_days(y, month), "recent", ctx.today)
        if days is None:
            return None
        year = days[0].year
    part = _month_part_key(match["part"])
    return to_span(*(month_part(year, month, part) if part else month_days(year, month)))


def _year(match: re.Match[str], ctx: Context) -> Span | None:
    """"去年", "2022年", "去年年底" (Nov-Dec), "今年年初" (Jan-Feb), "上半年" (Jan-Jun)."""
    year = _prefix_year(match, ctx)
    if year is None or not 1 <= year <= 9998:
        return None
    part = match["part"] or ""
    if "上半年" in part:
        return to_span(date(year, 1, 1), date(year, 7, 1))
    if "下半年" in part:
        return to_span(date(year, 7, 1), date(year + 1, 1, 1))
    if part.endswith("初"):
        return to_span(date(year, 1, 1), date(year, 3, 1))
    if part.endswith("中"):
        return to_span(date(year, 6, 1), date(year, 8, 1))
    if part.endswith(("底", "末")):
        return to_span(date(year, 11, 1), date(year + 1, 1, 1))
    return to_span(*year_days(year))


def _half_year(match: re.Match[str], ctx: Context) -> Span | None:
    """Bare "上半年"/"下半年" = this year's half."""
    year = ctx.today.year
    if match.group(0) == "上半年":
        return to_span(date(year, 1, 1), date(year, 7, 1))
    return to_span(date(year, 7, 1), date(year + 1, 1, 1))


def _relative_month(match: re.Match[str], ctx: Context) -> Span | None:
    """"上个月", "这个月8号", "下个月初"."""
    year, month = shift_month(ctx.today.year, ctx.today.month, _MONTH_WORDS[match["rel"]])
    if match["d"]:
        day = zh_number(match["d"])
        found = safe_date(year, month, day) if day else None
        return day_span(found) if found else None
    part = _month_part_key(match["part"])
    return to_span(*(month_part(year, month, part) if part else month_days(year, month)))


def _day_of_month(match: re.Match[str], ctx: Context) -> Span | None:
    """"8号" = the latest 8th on or before today."""
    if match["suffix"] == "日" and not match["d"].isdigit():
        return None  # why: "一日三餐" - a Chinese numeral + 日 is usually "one day", not a date
    day = zh_number(match["d"])
    found = recent_day_of_month(ctx.today, day) if day else None
    return day_span(found) if found else None


def _relative_day(match: re.Match[str], ctx: Context) -> Span | None:
    return day_span(ctx.today + timedelta(days=_DAY_WORDS[match.group(0)]))


def _compound_part(match: re.Match[str], ctx: Context) -> Span | None:
    """"今早", "昨晚" (yesterday evening), "昨夜" (yesterday night), "明早", "前晚"."""
    offsets = {"今": 0, "昨": -1, "明": 1, "前": -2}
    part = DAY_PART_WORDS[match["part"]]
    if match["day"] == "前" and part != "evening":
        return None
    return hours_span(ctx.today + timedelta(days=offsets[match["day"]]), part)


def _ago(match: re.Match[str], ctx: Context) -> Span | None:
    """"三天前" = that day; "两周前" = that week; "3个月前" = that month; "一年后" = next year."""
    count = zh_number(match["n"])
    if count is None or count > 200:
        return None  # why: "2010年前" is "before 2010", left to the year rule
    unit = _UNITS[match["unit"]]
    if match["n"] == "几" and unit == "day":
        # why: "几天前" is used for anything 2-7 days back, so it is the week before today
        return to_span(ctx.today - timedelta(days=7), ctx.today)
    future = match["dir"].endswith("后")
    return unit_ago(ctx, unit, -count if future else count)


def _duration(match: re.Match[str], ctx: Context) -> Span | None:
    """"最近三天", "过去两周", "这几天" = rolling window up to the end of today;
    "前两天" = the days before today; "这一周" = this calendar week."""
    count = zh_number(match["n"])
    if count is None or count == 0:
        return None
    unit = _UNITS[match["unit"]]
    head = match["head"]
    if head == "这" and count == 1:
        # "这一周" = this calendar week; "这一天" points into a story, not at a time
        return unit_ago(ctx, unit, 0) if unit in ("week", "month", "year") else None
    if head == "前":
        if match["n"] == "几" and unit == "day":
            return to_span(ctx.today - timedelta(days=7), ctx.today)  # same as 几天前
        start, _ = past_window(ctx, unit, count)
        return start, to_span(ctx.today, ctx.today)[0]
    return past_window(ctx, unit, count)


def _weekday(match: re.Match[str], ctx: Context) -> Span | None:
    """"周三" = the latest Wednesday on or before today; "上周五" = Friday of the previous
    calendar week; "这周三"/"本周三" = this week's; "下周一" = next week's."""
    weekday = _WEEKDAY_CHARS[match["wd"]]
    if match["rel"] is None:
        return day_span(weekday_on_or_before(ctx.today, weekday))
    return day_span(weekday_in_week(ctx.today, weekday, _WEEK_WORDS[match["rel"]]))


def _week(match: re.Match[str], ctx: Context) -> Span | None:
    return to_span(*week_days(ctx.today, _WEEK_WORDS[match["rel"]]))


def _weekend(match: re.Match[str], ctx: Context) -> Span | None:
    """"周末" = the latest weekend that has begun; "上个周末" = the previous week's; "这个周末" = this week's."""
    if match["rel"] is None:
        offset = 0 if ctx.today.weekday() >= 5 else -1
    else:
        offset = _WEEK_WORDS[match["rel"]]
    return to_span(*weekend_days(ctx.today, offset))


def _season(match: re.Match[str], ctx: Context) -> Span | None:
    """"今年春天", "去年夏天", "2023年冬天" (Dec 2023-Feb 2024); bare "夏天" = the latest summer begun."""
    season = _SEASONS[match["s"]]
    year = _prefix_year(match, ctx)
    if year is not None:
        return to_span(*season_days(year, season))
    rel = match["rel"]
    if rel in ("这个", "今"):
        return to_span(*season_of_today(ctx.today, season))
    mode = {"上个": "last", "去": "last", "下个": "next"}.get(rel or "", "recent")
    return _span_or_none(pick_occurrence(lambda y: season_days(y, season), mode, ctx.today))


NUMERALS = "零〇一二两三四五六七八九十百0123456789"


def inside_number(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` touches a numeral on either side (五一 in 十五一二 is part of a number)."""
    return (start > 0 and text[start - 1] in NUMERALS) or (end < len(text) and text[end] in NUMERALS)


def _numeral_around(match: re.Match[str]) -> bool:
    return inside_number(match.string, match.start("f"), match.end("f"))


def _festival(match: re.Match[str], ctx: Context) -> Span | None:
    """"今年春节", "去年国庆"; bare = the latest occurrence that has begun."""
    if match["f"] == "五一" and _numeral_around(match):
        return None  # why: "五一" inside a longer number ("十五一", "五一二") is not Labour Day
    key = FESTIVALS[match["f"]]
    year = _prefix_year(match, ctx)
    if year is not None:
        return _span_or_none(festival_span(key, year))
    return _span_or_none(pick_occurrence(lambda y: festival_span(key, y), "recent", ctx.today))


def _decade(match: re.Match[str], ctx: Context) -> Span | None:
    """"90年代" = the latest such decade not in the future; "1990年代" is explicit."""
    digit = zh_number(match["zd"]) if match["zd"] else int(match["d"])
    if digit is None:
        return None
    if match["c"]:
        start = int(match["c"]) * 100 + digit * 10
    else:
        start = 2000 + digit * 10
        if start > ctx.today.year:
            start -= 100
    return to_span(date(start, 1, 1), date(start + 10, 1, 1))


# --- rules -----------------------------------------------------------------------------------

_UNIT_PATTERN = r"(?P<unit>个?小时|个?钟头|分钟|天|日|个?星期|个?礼拜|周|个月|年)"
_WEEK_REL = r"(?P<rel>上上|上|这|本|下下|下)"


# Characters each rule needs; a rule whose trigger is absent is skipped (long texts stay fast).
_TRIGGERS = {
    "zh_date_range": "月",
    "zh_some_days_ago": "些",
    "zh_full_date": "月",
    "zh_month": "月",
    "zh_year": "年",
    "zh_half_year": "半年",
    "zh_relative_month": "月",
    "zh_day_of_month": "[号日]",
    "zh_relative_day": "[天日]",
    "zh_compound_part": "[今昨明前][早晨晚夜]",
    "zh_ago": "[前后]",
    "zh_duration": "[近去这前]",
    "zh_weekday": "[周期拜]",
    "zh_week": "[周期拜]",
    "zh_weekend": "周末",
    "zh_season": "[春夏秋冬][天季]",
    "zh_festival": "节|过年|除夕|大年|正月|元旦|清明|五一|端午|七夕|中秋|国庆|十一|平安夜|圣诞|双十一|双11|跨年",
    "zh_decade": "年代",
}


def _rule(name: str, pattern: str, resolve) -> Rule:
    return Rule(name, re.compile(pattern), resolve, re.compile(_TRIGGERS[name]))


RULES: tuple[Rule, ...] = (
    _rule(
        "zh_full_date",
        rf"(?<![\d]){_YEAR_PREFIX}(?P<m>{_MONTH_NUM})\s*月份?\s*(?P<d>{_DAY_NUM})\s*(?:日|号)",
        _full_date,
    ),
    _rule(
        "zh_date_range",
        rf"(?<![\d]){_YEAR_PREFIX}(?P<m>{_MONTH_NUM})\s*月\s*(?P<d>{_DAY_NUM})\s*[日号]?\s*(?:到|至|-|~|～|—|–)\s*"
        rf"(?:(?P<m2>{_MONTH_NUM})\s*月\s*)?(?P<d2>{_DAY_NUM})\s*[日号]",
        _date_range,
    ),
    _rule("zh_some_days_ago", r"前些天|前些日子|这些天|这些日子", _some_days),
    _rule(
        "zh_month",
        rf"(?<![\d零〇一二三四五六七八九十个这上下本每]){_YEAR_PREFIX}(?P<m>{_MONTH_NUM})\s*月份?"
        r"(?P<part>上旬|中旬|下旬|初|中(?![国文心午间])|底|末)?",
        _month,
    ),
    _rule(
        "zh_year",
        rf"(?:(?P<yrel>大前年|(?<!过)前年|(?<!过)去年|今年|明年|大后年|后年)|(?<!\d)(?P<y>{_YEAR_DIGITS})\s*年(?!代|级))"
        r"(?P<part>上半年|下半年|年初|年中|年底|年末|初|底|末)?",
        _year,
    ),
    _rule("zh_half_year", r"(?<![年\d])(?:上半年|下半年)", _half_year),
    _rule(
        "zh_relative_month",
        r"(?P<rel>上上个月|上个月|上月|这个月|这月|本月|下下个月|下个月|下月)"
        rf"(?:\s*的?\s*(?P<d>{_DAY_NUM})\s*(?:日|号)|(?P<part>上旬|中旬|下旬|初|中(?![国文心午间])|底|末))?",
        _relative_month,
    ),
    _rule(
        "zh_day_of_month",
        rf"(?<![\d月年零〇一二三四五六七八九十第几每])(?P<d>{_DAY_NUM})\s*(?P<suffix>号|日)(?![线楼房床车门机位院馆桌厅室座子码])",
        _day_of_month,
    ),
    _rule("zh_relative_day", r"大大前天|大前天|前天|昨天|昨日|今天|今日|大后天|后天|明天|明日", _relative_day),
    _rule(
        "zh_compound_part",
        r"(?P<day>今|昨|明|前)(?P<part>早上|早晨|晚上|夜里|早|晨|晚|夜)(?![会点了到辈饭餐])",
        _compound_part,
    ),
    _rule("zh_ago", rf"(?P<n>{NUM})\s*{_UNIT_PATTERN}\s*(?P<dir>以前|之前|前|以后|之后|后)(?![来面边悔])", _ago),
    _rule(
        "zh_duration",
        rf"(?P<head>最近|过去|近|这|前)\s*的?\s*(?P<n>{NUM})\s*{_UNIT_PATTERN}(?!\s*(?:以|之)?[前后])",
        _duration,
    ),
    _rule(
        "zh_weekday",
        rf"(?<![零〇一二两三四五六七八九十几每半个]){_WEEK_REL}?\s*个?\s*(?:周|星期|礼拜)(?P<wd>一(?![起直样般些次共切])|[二三四五六日天1-7])",
        _weekday,
    ),
    _rule(
        "zh_week",
        rf"{_WEEK_REL}\s*[个一]?\s*(?:周|星期|礼拜)(?![二三四五六日天末1-7]|一(?![起直样般些次共切]))",
        _week,
    ),
    _rule("zh_weekend", rf"(?<![零〇一二两三四五六七八九十几每个]){_WEEK_REL}?\s*[个一]?\s*周末", _weekend),
    _rule(
        "zh_season",
        rf"(?:{_YEAR_PREFIX}|(?P<rel>这个|上个|下个))(?P<s>[春夏秋冬])(?:天|季)",
        _season,
    ),
    _rule(
        "zh_festival",
        rf"{_YEAR_PREFIX}(?P<f>{'|'.join(sorted(FESTIVALS, key=len, reverse=True))})",
        _festival,
    ),
    _rule("zh_decade", r"(?:(?P<c>19|20)?(?P<d>\d)0|(?P<zd>[一二三四五六七八九])十)\s*年代", _decade),
)
