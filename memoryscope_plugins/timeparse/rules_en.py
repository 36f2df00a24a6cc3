"""English time rules. Every pattern is compiled once at import, case-insensitive."""

from __future__ import annotations

import re
from datetime import date, timedelta

from .calendar_math import (
    ONE_DAY,
    Context,
    DaySpan,
    Rule,
    Span,
    day_span,
    future_window,
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
    weekday_after,
    weekday_in_week,
    weekday_on_or_before,
    weekend_days,
    year_days,
    year_part,
)
from .festivals import festival_span
from .number_words import EN_NUMBER_PATTERN, en_number

_I = re.IGNORECASE

MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
WEEKDAYS_BY_PREFIX = {name[:3]: number for name, number in WEEKDAYS.items()}
UNITS = r"(?P<unit>day|week|month|year|hour|minute)s?"

_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_WEEKDAY = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAY = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?"
# An optional year after a month, season or festival: "May 8, 2023", "summer of 2023", "Christmas last year".
_YEAR_SUFFIX = r"(?:,?\s+(?:of\s+|in\s+)?(?:(?P<y>(?:19|20)\d{2})\b|(?P<yrel>last|this|next)\s+year\b))?"
_REL = r"(?P<rel>this\s+past|this\s+coming|last|this|next|past|coming|previous)"
# "early May", "mid-2023", "the end of last month", "the beginning of 2020".
_PART = r"(?:(?P<part>early|mid|late)[-\s]+|(?:the\s+)?(?P<edge>end|beginning|start|middle)\s+of\s+)"
_EDGE_PART = {"end": "late", "beginning": "early", "start": "early", "middle": "mid"}

# Words before a bare month/year/season that show it is meant as a time ("in May", "since 2020").
_CUE_BEFORE = re.compile(
    r"\b(?:in|during|over|since|of|until|till|before|after|from|through|throughout|between|around|"
    r"for|early|late|mid|and|or|to)[\s-]+(?:the\s+)?$",
    _I,
)
_WEAK_CUES = ("and", "or", "to")  # these count only before a capitalised word ("to March", not "to march")
_UNAMBIGUOUS_MONTHS = ("january", "february", "july", "september", "october", "november", "december")
_REL_MODE = {
    "last": "last", "past": "last", "this past": "last", "previous": "last",
    "this": "this", "next": "next", "coming": "next", "this coming": "next",
}
_YEAR_REL = {"last": -1, "this": 0, "next": 1, "previous": -1, "coming": 1}


def _norm(word: str | None) -> str:
    return " ".join(word.lower().split()) if word else ""


def _has_cue(match: re.Match[str], word_group: str) -> bool:
    """Whether a cue word stands right before the match (weak cues need a capitalised word)."""
    cue = _CUE_BEFORE.search(match.string, max(0, match.start() - 20), match.start())
    if cue is None:
        return False
    if cue.group(0).split()[0].lower().rstrip("-") in _WEAK_CUES:
        first = match[word_group][:1]
        return first.isupper() or first.isdigit()
    return True


def _suffix_year(match: re.Match[str], ctx: Context) -> int | None:
    if match["y"]:
        return int(match["y"])
    if match["yrel"]:
        return ctx.today.year + _YEAR_REL[match["yrel"].lower()]
    return None


def _month_number(word: str) -> int:
    return MONTHS[word[:3].lower()]


def _part_of(match: re.Match[str]) -> str | None:
    """early / mid / late from "early May" or "the end of May"; None when not given."""
    if match["part"]:
        return match["part"].lower()
    if match["edge"]:
        return _EDGE_PART[match["edge"].lower()]
    return None


def _span_or_none(days: DaySpan | None) -> Span | None:
    return to_span(*days) if days else None


# --- resolvers -------------------------------------------------------------------------------


def _month_day(match: re.Match[str], ctx: Context) -> Span | None:
    month, day = _month_number(match["month"]), int(match["d"])
    year = _suffix_year(match, ctx)
    found = safe_date(year, month, day) if year else recent_month_day(ctx.today, month, day)
    return day_span(found) if found else None


def _date_range(match: re.Match[str], ctx: Context) -> Span | None:
    """"May 8-10, 2023", "June 3 to 5": [first day, day after the last)."""
    first = _month_day(match, ctx)
    if first is None or first[0] is None:
        return None
    last = safe_date(first[0].year, first[0].month, int(match["d2"]))
    if last is None or last < first[0].date():
        return None
    return first[0], day_span(last)[1]


def _month(match: re.Match[str], ctx: Context) -> Span | None:
    """A month without a day: "in May" (the latest May that has begun), "last May", "early June 2023"."""
    word, rel = match["month"], _norm(match["rel"])
    year = _suffix_year(match, ctx)
    needs_cue = word.lower() not in _UNAMBIGUOUS_MONTHS
    part = _part_of(match)
    if not (rel or year or part) and needs_cue and not _has_cue(match, "month"):
        return None  # why: "may", "march", "Jan" are words or names unless a cue marks them as months
    month = _month_number(word)
    if year is None:
        days = pick_occurrence(lambda y: month_days(y, month), _REL_MODE.get(rel, "recent"), ctx.today)
        if days is None:
            return None
        year = days[0].year
    if part:
        return to_span(*month_part(year, month, part))
    return to_span(*month_days(year, month))


def _year(match: re.Match[str], ctx: Context) -> Span | None:
    """A four-digit year, only after a cue ("in 2022", "the year 2022", "early 2023")."""
    part = _part_of(match)
    if not (part or match["yearword"] or _has_cue(match, "y")):
        return None  # why: a bare number such as 2000 is more often an amount than a year
    year = int(match["y"])
    if part:
        return to_span(*year_part(year, part))
    return to_span(*year_days(year))


def _decade(match: re.Match[str], ctx: Context) -> Span | None:
    """"the 90s" is the latest such decade not in the future; "the 1990s" is explicit."""
    if match["c"]:
        start = int(match["c"]) * 100 + int(match["d"]) * 10
    else:
        start = 2000 + int(match["d2"]) * 10
        if start > ctx.today.year:
            start -= 100
    return to_span(date(start, 1, 1), date(start + 10, 1, 1))


def _relative_day(match: re.Match[str], ctx: Context) -> Span | None:
    word = _norm(match.group(0))
    if word == "tonight":
        return hours_span(ctx.today, "night")
    offsets = {"today": 0, "yesterday": -1, "tomorrow": 1}
    if word in offsets:
        return day_span(ctx.today + timedelta(days=offsets[word]))
    offset = -2 if "before" in word else 2
    return day_span(ctx.today + timedelta(days=offset))


def _this_part(match: re.Match[str], ctx: Context) -> Span | None:
    return hours_span(ctx.today, match["part"].lower())


def _last_night(match: re.Match[str], ctx: Context) -> Span | None:
    return hours_span(ctx.today - ONE_DAY, "night")


def _earlier_later(match: re.Match[str], ctx: Context) -> Span | None:
    """"earlier today/this week" = [start of it, now); "later today/this week" = [now, end of it)."""
    unit = (match["unit"] or "day").lower()
    if unit == "day":
        first, end = ctx.today, ctx.today + ONE_DAY
    elif unit == "week":
        first, end = week_days(ctx.today)
    elif unit == "month":
        first, end = month_days(ctx.today.year, ctx.today.month)
    else:
        first, end = year_days(ctx.today.year)
    start, stop = to_span(first, end)
    return (start, ctx.now) if match["dir"].lower() == "earlier" else (ctx.now, stop)


def _ago(match: re.Match[str], ctx: Context) -> Span | None:
    """"3 days ago" = that calendar day; "2 weeks ago" = that Monday-Sunday week; likewise months, years."""
    count = en_number(match["n"])
    if count is None:
        return None
    unit = match["unit"].lower()
    if unit == "day" and _norm(match["n"]) in ("a few", "few", "several"):
        # why: "a few days ago" is used for anything 2-7 days back, so it is the week before today
        return to_span(ctx.today - timedelta(days=7), ctx.today)
    return unit_ago(ctx, unit, count)


def _from_now(match: re.Match[str], ctx: Context) -> Span | None:
    count = en_number(match["n"])
    return unit_ago(ctx, match["unit"].lower(), -count) if count is not None else None


def _duration(match: re.Match[str], ctx: Context) -> Span | None:
    """"the past 3 days" / "over the last two weeks" = rolling window up to the end of today."""
    head = _norm(match["head"])
    if match["n"] is None and head in ("last", "previous", "the previous"):
        return None  # why: "last week" (no "the") is the calendar week, handled by another rule
    count = en_number(match["n"]) if match["n"] else 1
    if count is None:
        return None
    return past_window(ctx, match["unit"].lower(), count)


def _next_duration(match: re.Match[str], ctx: Context) -> Span | None:
    count = en_number(match["n"]) if match["n"] else 1
    return future_window(ctx, match["unit"].lower(), count) if count is not None else None


def _recent_units(match: re.Match[str], ctx: Context) -> Span | None:
    return past_window(ctx, match["unit"].lower(), 3)


def _weekday_number(word: str) -> int:
    """Monday=0 from a weekday name or abbreviation ("Friday", "Fri", "Thurs")."""
    return WEEKDAYS_BY_PREFIX[word[:3].lower()]


def _weekday(match: re.Match[str], ctx: Context) -> Span | None:
    """Weekday rules (weeks start on Monday):

    "Friday"/"on Friday" = the latest Friday on or before today; "last Friday" = the latest Friday
    strictly before today; "this Friday" = Friday of the current week; "next Friday" = Friday of
    next week; "this coming Friday" = the first Friday after today; "Friday before last" = a week
    before "last Friday".
    """
    if _EVERY_BEFORE.search(match.string, max(0, match.start() - 6), match.start()):
        return None  # "every Friday" repeats; it names no single day
    weekday = _weekday_number(match["wd"])
    rel = _REL_MODE.get(_norm(match["rel"]), "recent")
    if rel == "this":
        day = weekday_in_week(ctx.today, weekday)
    elif rel == "next":
        coming = _norm(match["rel"]) in ("coming", "this coming")
        day = weekday_after(ctx.today, weekday) if coming else weekday_in_week(ctx.today, weekday, 1)
    elif rel == "last" or match.groupdict().get("before"):
        day = weekday_on_or_before(ctx.today - ONE_DAY, weekday)
        if match.groupdict().get("before"):
            day -= timedelta(days=7)
    else:
        day = weekday_on_or_before(ctx.today, weekday)
    return day_span(day)


_EVERY_BEFORE = re.compile(r"\b(?:every|each)\s+$", _I)
_ON_BEFORE = re.compile(r"\bon\s+$", _I)


def _weekday_short(match: re.Match[str], ctx: Context) -> Span | None:
    """"on Sat", "last Fri": abbreviations count only after "on" or last/this/next."""
    if not (match["rel"] or _ON_BEFORE.search(match.string, max(0, match.start() - 4), match.start())):
        return None
    return _weekday(match, ctx)


def _weekday_of_week(match: re.Match[str], ctx: Context) -> Span | None:
    """"Friday last week" / "last week's Friday" = Friday of that calendar week."""
    offset = _YEAR_REL[match["rel"].lower()]
    return day_span(weekday_in_week(ctx.today, WEEKDAYS[match["wd"].lower()], offset))


def _week(match: re.Match[str], ctx: Context) -> Span | None:
    text = _norm(match.group(0))
    if "before last" in text:
        offset = -2
    elif "after next" in text:
        offset = 2
    else:
        offset = _YEAR_REL[_norm(match["rel"])]
    return to_span(*week_days(ctx.today, offset))


def _weekend(match: re.Match[str], ctx: Context) -> Span | None:
    """"the weekend" = the latest weekend that has begun; "last weekend" = the previous week's;
    "this weekend" = the current week's; "next weekend" = next week's.
    """
    rel = _norm(match["rel"])
    if match["before"]:
        offset = -2
    elif rel in ("last", "previous", "this past"):
        offset = -1
    elif rel == "this":
        offset = 0
    elif rel in ("next",):
        offset = 1
    elif rel in ("coming", "this coming"):
        offset = 1 if ctx.today.weekday() >= 5 else 0
    else:
        offset = 0 if ctx.today.weekday() >= 5 else -1
    return to_span(*weekend_days(ctx.today, offset))


def _relative_unit(match: re.Match[str], ctx: Context) -> Span | None:
    """"last/this/next month|year", "the month/year before last", "the month/year after next"."""
    text = _norm(match.group(0))
    if "before last" in text:
        offset = -2
    elif "after next" in text:
        offset = 2
    else:
        offset = _YEAR_REL[_norm(match["rel"])]
    part = _part_of(match)
    if (match["unit"] or match["unit2"]).lower() == "month":
        year, month = shift_month(ctx.today.year, ctx.today.month, offset)
        return to_span(*(month_part(year, month, part) if part else month_days(year, month)))
    year = ctx.today.year + offset
    return to_span(*(year_part(year, part) if part else year_days(year)))


def _season(match: re.Match[str], ctx: Context) -> Span | None:
    """Meteorological seasons (spring = Mar-May, summer = Jun-Aug, autumn = Sep-Nov, winter = Dec-Feb).

    "in the summer" = the latest summer that has begun; "last summer" = the latest one that is over;
    "this summer" = the current year's; "next summer" = the first one after today.
    """
    season = match["season"].lower()
    season = "autumn" if season == "fall" else season
    rel = _norm(match["rel"])
    year = _suffix_year(match, ctx)
    if not (rel or year or _has_cue(match, "season")):
        return None  # why: "spring", "I fall", "the summer job" are not times without a cue ("in the summer")
    if year is not None:
        return to_span(*season_days(year, season))
    mode = _REL_MODE.get(rel, "recent")
    if mode == "this":
        return to_span(*season_of_today(ctx.today, season))
    return _span_or_none(pick_occurrence(lambda y: season_days(y, season), mode, ctx.today))


_FESTIVAL_KEYS = (
    (re.compile(r"christmas\s+eve", _I), "christmas_eve"),
    (re.compile(r"christmas|xmas", _I), "christmas"),
    (re.compile(r"(?:chinese|lunar)\s+new\s+year'?s?\s+eve", _I), "lunar_new_year_eve"),
    (re.compile(r"chinese\s+new\s+year|lunar\s+new\s+year|spring\s+festival", _I), "spring_festival"),
    (re.compile(r"new\s+year", _I), None),  # resolved below: eve or day
    (re.compile(r"valentine", _I), "valentine"),
    (re.compile(r"halloween", _I), "halloween"),
    (re.compile(r"thanksgiving", _I), "thanksgiving"),
    (re.compile(r"easter", _I), "easter"),
    (re.compile(r"independence|fourth\s+of\s+july|4th\s+of\s+july", _I), "independence_day"),
    (re.compile(r"mother", _I), "mothers_day"),
    (re.compile(r"father", _I), "fathers_day"),
    (re.compile(r"mid[-\s]?autumn|moon\s+festival", _I), "mid_autumn"),
    (re.compile(r"dragon\s+boat", _I), "dragon_boat"),
    (re.compile(r"lantern", _I), "lantern"),
    (re.compile(r"qingming|tomb[-\s]sweeping", _I), "qingming"),
)


def festival_key(name: str) -> str | None:
    """Canonical festival key of an English festival name."""
    for pattern, key in _FESTIVAL_KEYS:
        if pattern.search(name):
            if key is None:
                return "new_year_eve" if re.search(r"eve\b", name, _I) else "new_year_day"
            return key
    return None


def _festival(match: re.Match[str], ctx: Context) -> Span | None:
    """A festival: bare = the latest that has begun; "last" = the latest that is over; "this" =
    this year's; "next" = the first after today; with a year = that year's."""
    name = match["fest"]
    if _norm(name) == "new year" and not name[0].isupper():
        return None
    key = festival_key(name)
    if key is None:
        return None
    year = _suffix_year(match, ctx)
    if year is not None:
        return _span_or_none(festival_span(key, year))
    mode = _REL_MODE.get(_norm(match["rel"]), "recent")
    return _span_or_none(pick_occurrence(lambda y: festival_span(key, y), mode, ctx.today))


def _day_of_month(match: re.Match[str], ctx: Context) -> Span | None:
    """"on the 8th" = the latest 8th on or before today; "the 8th of last month" = that month's."""
    day = int(match["d"])
    rel = match.groupdict().get("rel")
    if rel:
        year, month = shift_month(ctx.today.year, ctx.today.month, _YEAR_REL[rel.lower()])
        found = safe_date(year, month, day)
    else:
        found = recent_day_of_month(ctx.today, day)
    return day_span(found) if found else None


def _numeric_month_day(match: re.Match[str], ctx: Context) -> Span | None:
    found = recent_month_day(ctx.today, int(match["a"]), int(match["b"]))
    return day_span(found) if found else None


# --- rules -----------------------------------------------------------------------------------

_N = rf"(?P<n>{EN_NUMBER_PATTERN})"


_UNIT_WORDS = r"\b(?:day|week|month|year|hour|minute)s?\b"
_MONTH_WORDS = r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_WEEKDAY_WORDS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day\b"
# Keywords each rule needs; a rule whose keyword is absent is skipped (long texts stay fast).
_TRIGGERS = {
    "en_month_day": _MONTH_WORDS,
    "en_date_range": _MONTH_WORDS,
    "en_day_month": _MONTH_WORDS,
    "en_month": _MONTH_WORDS,
    "en_year": r"(?:19|20)\d\d",
    "en_decade": r"0(?:'|’)?s\b",
    "en_relative_day": r"today|yesterday|tomorrow|tonight",
    "en_this_part": r"\bthis\s",
    "en_last_night": r"night",
    "en_earlier_later": r"earlier|later",
    "en_ago": r"\b(?:ago|back|now)\b",
    "en_in_units": _UNIT_WORDS,
    "en_from_now2": r"from\s+(?:now|today)",
    "en_duration": _UNIT_WORDS,
    "en_next_duration": _UNIT_WORDS,
    "en_recent_units": r"recent",
    "en_weekday": _WEEKDAY_WORDS,
    "en_weekday_short": r"(?-i:\b(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)\b)",
    "en_weekday_of_week": r"week\b",
    "en_week_weekday": r"week(?:'s|’s)?\s",
    "en_week": r"week",
    "en_weekend": r"weekend",
    "en_relative_unit": r"month|year",
    "en_season": r"spring|summer|autumn|fall|winter",
    "en_festival": (
        r"christmas|xmas|year|valentine|halloween|thanksgiving|easter|independence|july|mother|father|tomb|"
        r"festival|qingming"
    ),
    "en_day_of_month": r"\d(?:st|nd|rd|th)",
    "en_day_of_rel_month": r"\d(?:st|nd|rd|th)",
    "en_numeric_month_day": r"\d/\d",
}


def _rule(name: str, pattern: str, resolve) -> Rule:
    # re.compile caches by pattern text, so rules with the same trigger share one compiled object
    return Rule(name, re.compile(pattern, _I), resolve, re.compile(_TRIGGERS[name], _I))


RULES: tuple[Rule, ...] = (
    _rule("en_month_day", rf"\b{_MONTH}\s+(?:the\s+)?{_DAY}\b{_YEAR_SUFFIX}", _month_day),
    _rule(
        "en_date_range",
        rf"\b{_MONTH}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s*(?:-|–|to|through|until|till)\s*"
        rf"(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b{_YEAR_SUFFIX}",
        _date_range,
    ),
    _rule("en_day_month", rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR_SUFFIX}", _month_day),
    _rule(
        "en_month",
        rf"\b{_PART}?(?:{_REL}\s+)?{_MONTH}{_YEAR_SUFFIX}",
        _month,
    ),
    _rule(
        "en_year",
        rf"\b(?:{_PART}|(?P<yearword>(?:the\s+)?year\s+(?:of\s+)?))?"
        r"(?P<y>(?:19|20)\d{2})\b(?![-/.:]\d|\s*(?:%|percent|dollars|people|times|km|miles|euros|yuan|元|块))",
        _year,
    ),
    _rule("en_decade", r"\bthe\s+(?:(?:'|’)?(?P<d2>\d)0(?:'|’)?s|(?P<c>19|20)(?P<d>\d)0(?:'|’)?s)\b", _decade),
    _rule(
        "en_relative_day",
        r"\b(?:(?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|today|yesterday|tomorrow|tonight)\b",
        _relative_day,
    ),
    _rule("en_this_part", r"\bthis\s+(?P<part>morning|afternoon|evening)\b", _this_part),
    _rule("en_last_night", r"\blast\s+night\b", _last_night),
    _rule(
        "en_earlier_later",
        r"\b(?P<dir>earlier|later)\s+(?:today|this\s+(?P<unit>week|month|year))\b",
        _earlier_later,
    ),
    _rule("en_ago", rf"\b{_N}\s+{UNITS}\s+(?:ago|back|before\s+now|earlier\s+than\s+now)\b", _ago),
    _rule("en_in_units", rf"\bin\s+{_N}\s+{UNITS}\b(?:(?:'|’)?\s+time\b)?", _from_now),
    _rule("en_from_now2", rf"\b{_N}\s+{UNITS}\s+from\s+(?:now|today)\b", _from_now),
    _rule(
        "en_duration",
        rf"\b(?P<head>(?:the|these|this)\s+(?:past|last|previous)|past|last|previous)\s+(?:{_N}\s+)?{UNITS}\b(?!\s+of\b)",
        _duration,
    ),
    # why: a number is required - "the next day" is relative to a story, not to now
    _rule("en_next_duration", rf"\b(?:the|these)\s+(?:next|coming)\s+{_N}\s+{UNITS}\b(?!\s+of\b)", _next_duration),
    _rule("en_recent_units", r"\brecent\s+(?P<unit>day|week|month|year)s\b", _recent_units),
    _rule("en_weekday", rf"\b(?:the\s+)?(?:{_REL}\s+)?{_WEEKDAY}\b(?P<before>\s+before\s+last)?", _weekday),
    _rule(
        "en_weekday_short",
        rf"\b(?:{_REL}\s+)?(?-i:(?P<wd>Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun))\b\.?",
        _weekday_short,
    ),
    _rule("en_weekday_of_week", rf"\b{_WEEKDAY}\s+(?:of\s+)?(?P<rel>last|this|next)\s+week\b", _weekday_of_week),
    _rule("en_week_weekday", rf"\b(?P<rel>last|this|next)\s+week(?:'s|’s)?\s+{_WEEKDAY}\b", _weekday_of_week),
    _rule(
        "en_week",
        r"\b(?:(?:the\s+)?(?P<rel>last|this|next|previous|coming)\s+week|the\s+week\s+before\s+last|the\s+week\s+after\s+next)\b",
        _week,
    ),
    _rule(
        "en_weekend",
        rf"\b(?:{_REL}\s+|the\s+)weekend\b(?P<before>\s+before\s+last)?",
        _weekend,
    ),
    _rule(
        "en_relative_unit",
        rf"\b{_PART}?(?:(?:the\s+)?(?P<rel>last|this|next|previous|coming)\s+(?P<unit>month|year)|"
        r"the\s+(?P<unit2>month|year)\s+(?:before\s+last|after\s+next))\b",
        _relative_unit,
    ),
    _rule(
        "en_season",
        rf"\b(?:{_REL}\s+|(?P<the>the)\s+)?(?P<season>spring|summer|autumn|fall|winter)\b{_YEAR_SUFFIX}",
        _season,
    ),
    _rule(
        "en_festival",
        rf"\b(?:{_REL}\s+)?(?P<fest>christmas\s+eve|christmas(?:\s+day)?|xmas|"
        r"(?:chinese|lunar)\s+new\s+year(?:'s|’s|s)?(?:\s+eve|\s+day)?|new\s+year(?:'s|’s|s)?(?:\s+eve|\s+day)?|"
        r"valentine(?:'s|’s|s)?(?:\s+day)?|halloween|thanksgiving(?:\s+day)?|easter(?:\s+sunday)?|"
        r"independence\s+day|(?:the\s+)?(?:fourth|4th)\s+of\s+july|mother(?:'s|’s|s)\s+day|father(?:'s|’s|s)\s+day|"
        r"spring\s+festival|mid[-\s]?autumn\s+festival|moon\s+festival|dragon\s+boat\s+festival|"
        rf"lantern\s+festival|qingming(?:\s+festival)?|tomb[-\s]sweeping\s+day)\b{_YEAR_SUFFIX}",
        _festival,
    ),
    _rule("en_day_of_month", rf"\bon\s+the\s+{_DAY}\b(?!\s+(?:of\s+)?{_MONTH})", _day_of_month),
    _rule("en_day_of_rel_month", rf"\bthe\s+{_DAY}\s+of\s+(?P<rel>last|this|next)\s+month\b", _day_of_month),
    _rule("en_numeric_month_day", r"\bon\s+(?P<a>\d{1,2})/(?P<b>\d{1,2})(?![\d/])", _numeric_month_day),
)
