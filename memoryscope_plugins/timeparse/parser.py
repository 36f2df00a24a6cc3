"""Time awareness without an LLM: find the time a query (or a memory) talks about, in English and Chinese.

`parse_time("what did I eat last Friday?", now)` returns the exact half-open range of the expression
("last Friday" = the latest Friday strictly before today), the matched substrings, the text without
them, whether the text asks *when* something happened, and the detected language.

Rules are regular expressions compiled at import (see rules_en.py, rules_zh.py,
rules_common.py); the calendar conventions are in calendar_math.py and docs/time_parser.md.
Weeks start on Monday. Only the standard library is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from ..types import TimeRange
from . import rules_common, rules_en, rules_zh
from .calendar_math import (
    DAY_PARTS,
    ONE_DAY,
    Context,
    Rule,
    Span,
    day_span,
    hours_span,
    month_days,
    shift_month,
    to_span,
    week_days,
    weekday_after,
    weekday_on_or_before,
    year_days,
)
from .number_words import EN_NUMBER_PATTERN, en_number

__all__ = ["ParsedTime", "parse_time", "detect_language", "parse_time_json"]


@dataclass(frozen=True, slots=True)
class ParsedTime:
    """What `parse_time` found in a text."""

    range: TimeRange | None  # union (hull) of all time expressions found; None when the text names no time
    expressions: tuple[str, ...]  # the matched substrings, as in the text, in text order
    remainder: str  # the text with the time expressions removed (whitespace tidied)
    asks_when: bool  # the text asks about time ("when did I ...", "什么时候")
    language: str  # "en" or "zh"


@dataclass(slots=True)
class _Found:
    start: int  # the expression itself (what `expressions` reports)
    end: int
    span: Span
    rule: str
    cut_start: int = -1  # what `remainder` drops: the expression plus a leading preposition / trailing 的
    cut_end: int = -1


# --- fast paths and small patterns -----------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_HAS_LATIN = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"\d")
# Full-width ASCII (Ｕ+FF01..FF5E) and the ideographic space map 1:1 to ASCII, so match offsets stay valid.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}

_EN_TRIGGER = re.compile(
    r"\d|\b(?:today|tonight|yesterday|tomorrow|ago|week|month|year|days?|hours?|minutes?|morning|afternoon|"
    r"evening|night|noon|mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|"
    r"spring|summer|autumn|fall|winter|christmas|xmas|new|halloween|thanksgiving|easter|valentine|"
    r"independence|fourth|mother|father|mid|moon|dragon|lantern|qingming|tomb|recent|earlier|later)",
    re.IGNORECASE,
)
_ZH_TRIGGER = re.compile(
    r"[年月日号天周期拜早晚晨夜节季]|小时|钟头|分钟|除夕|元旦|清明|端午|七夕|中秋|国庆|圣诞|五一|双十一|双11|光棍|长假|假期|上半|下半"
)

_ASKS_WHEN_EN = re.compile(
    r"\bwhen\s+(?:did|do|does|was|were|is|are|will|would|have|has|had|can|could|should|am|shall|might)\b|"
    r"\bwhen(?:'s|’s)\b|\bwhen\s*\?|\bsince\s+when\b|"
    r"\b(?:what|which)\s+(?:year|month|day|date|time|week|weekend|season|decade)\b|"
    r"\bhow\s+long\s+(?:ago|since|has\s+it\s+been|had\s+it\s+been|is\s+it\s+since)\b|"
    r"\bhow\s+many\s+(?:days|weeks|months|years|hours)\s+ago\b",
    re.IGNORECASE,
)
_ASKS_WHEN_ZH = re.compile(
    r"什么时候|啥时候|何时|哪天|哪一天|哪日|几号|哪号|几月|哪个月|哪一月|哪一年|哪年|几几年|"
    r"多久以前|多久之前|多久前|多长时间以前|多长时间之前|多长时间前|多少天前|多少年前|"
    r"星期几|周几|礼拜几|几点|什么日子|什么日期|哪个日期|哪个周末|哪一周|哪周|哪个星期|哪个季节|什么季节|何年"
)

# Part of a day after a one-day expression: "yesterday afternoon", "Friday night", "昨天下午", "上周五晚上".
_PART_AFTER_EN = re.compile(
    r"\s*,?\s*(?:in\s+the\s+|at\s+|during\s+the\s+)?(?P<part>morning|afternoon|evening|night|noon|midnight|lunchtime)\b",
    re.IGNORECASE,
)
_PART_BEFORE_EN = re.compile(
    r"(?:\b(?:in|on|during)\s+)?\bthe\s+(?P<part>morning|afternoon|evening|night)\s+of\s+$", re.IGNORECASE
)
_PART_AFTER_ZH = re.compile(
    r"\s*的?\s*(?P<part>早上|早晨|清晨|上午|中午|下午|傍晚|晚上|夜里|夜间|夜晚|半夜|深夜|凌晨|晚(?![会点了到辈]))"
)
_EN_PART_KEYS = {"lunchtime": "noon"}
_ZH_PART_KEYS = rules_zh.DAY_PART_WORDS

# Words that bound a range on one side: "since May" = [May 1, open); "before 2020" = [open, 2020-01-01).
_MODIFIER_EN = re.compile(
    r"\b(?P<mod>ever\s+since|since|after|before|prior\s+to|until|till|til|up\s+to)\s+$", re.IGNORECASE
)
_PREPOSITION_EN = re.compile(
    r"\b(?:in|on|at|during|over|for|within|throughout|around|from|between|back\s+in)\s+$", re.IGNORECASE
)
_MODIFIER_ZH_BEFORE = re.compile(r"(?P<mod>自从|自打|从|自|截至|截止到|截止|直到)\s*$")
_MODIFIER_ZH_AFTER = re.compile(
    r"\s*(?P<mod>以来|至今|起|开始|之前|以前|前(?![天年后夕几两一二三四五六七八九十])|之后|以后|后(?![天年来面边悔]))"
)
_PREPOSITION_ZH = re.compile(r"(?<![现正存实所好自内外不])(?:在|于|从)\s*$")

_TAIL_ZH = re.compile(r"(?:期间|的时候|那天|那时候?|时候|的(?=[\u4e00-\u9fff]))")
# "the Sunday before 25 May 2023", "two weekends after Christmas": a unit counted from another expression.
_ANCHORED_EN = re.compile(
    rf"\b(?:the\s+)?(?:(?P<n>{EN_NUMBER_PATTERN})\s+)?"
    r"(?P<unit>monday|tuesday|wednesday|thursday|friday|saturday|sunday|day|week|weekend|month|year)s?"
    r"\s+(?P<dir>before|after)\s+$",
    re.IGNORECASE,
)

_TIDY_SPACE = re.compile(r"\s+")
_TIDY_BEFORE_PUNCT = re.compile(r"\s+([?.!,;:？。！，；：、])")
_TIDY_CJK_GAP = re.compile(r"(?<=[\u4e00-\u9fff，。？！、])\s+(?=[\u4e00-\u9fff，。？！、])")
_TIDY_LEADING = re.compile(r"^[\s,，、;；:：]+")
_TIDY_DANGLING = re.compile(r"[,，、]\s*(?=[?.!？。！]|$)")


# --- public API ------------------------------------------------------------------------------


def detect_language(text: str) -> str:
    """"zh" when CJK characters dominate (at least as many CJK characters as Latin words), else "en"."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    cjk = len(_CJK.findall(text))
    if cjk == 0:
        return "en"
    return "zh" if cjk >= len(_LATIN_WORD.findall(text)) else "en"


def parse_time(text: str, now: datetime, *, language: str | None = None) -> ParsedTime:
    """Find the time expressions of `text` relative to `now` and their exact [start, end) range.

    `now` may be naive or timezone-aware; the range carries the same tzinfo (times are wall-clock times
    in that zone). English and Chinese rules both run, so mixed text works; `language` only overrides
    the reported language. Raises TypeError for a non-str text or a non-datetime now, ValueError for
    an unknown language. Text whose times would leave datetime's years 1-9999 ("in 3 years" said in
    9998) is returned unparsed.
    """
    _check_inputs(text, now, language)
    lang = language or detect_language(text)
    work = text.translate(_FULL_WIDTH)
    asks = bool(_ASKS_WHEN_EN.search(work) or _ASKS_WHEN_ZH.search(work))
    try:
        found = _find_all(work, Context(now=now.replace(tzinfo=None), today=now.date()))
        time_range = _union([item.span for item in found], now.tzinfo) if found else None
    except (OverflowError, ValueError):  # a date past year 9999 or before year 1
        found, time_range = [], None
    if not found:
        return ParsedTime(None, (), _tidy(text), asks, lang)
    expressions = tuple(text[item.start:item.end].strip() for item in found)
    return ParsedTime(time_range, expressions, _remove(text, found), asks, lang)


def parse_time_json(text: str, now: datetime) -> dict:
    """`parse_time` as a JSON-ready dict: {"text", "start", "end"} with ISO 8601 times (None when open or no time)."""
    parsed = parse_time(text, now)
    start = parsed.range.start if parsed.range else None
    end = parsed.range.end if parsed.range else None
    return {
        "text": text,
        "start": start.isoformat() if start else None,
        "end": end.isoformat() if end else None,
    }


# --- internals -------------------------------------------------------------------------------


def _check_inputs(text: object, now: object, language: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(now, datetime):
        raise TypeError(f"now must be a datetime.datetime, got {type(now).__name__}")
    if language is not None and language not in ("en", "zh"):
        raise ValueError(f"language must be 'en', 'zh' or None, got {language!r}")


def _rules_for(text: str) -> list[Rule]:
    """Only the rule sets whose trigger words occur: texts without time words return at once."""
    rules: list[Rule] = []
    has_latin = _HAS_LATIN.search(text) is not None
    if has_latin and _EN_TRIGGER.search(text):
        rules.extend(rules_en.RULES)
    has_cjk = _CJK.search(text) is not None
    if has_cjk and _ZH_TRIGGER.search(text):
        rules.extend(rules_zh.RULES)
    if _DIGIT.search(text):
        rules.extend(rules_common.RULES)
    return rules


def _find_all(text: str, ctx: Context) -> list[_Found]:
    candidates: list[tuple[int, _Found]] = []
    triggered: dict[re.Pattern[str], bool] = {}  # rules share triggers: search each once
    for order, rule in enumerate(_rules_for(text)):
        if rule.trigger is not None:
            if rule.trigger not in triggered:
                triggered[rule.trigger] = rule.trigger.search(text) is not None
            if not triggered[rule.trigger]:
                continue
        for match in rule.pattern.finditer(text):
            if match.end() == match.start():
                continue
            span = rule.resolve(match, ctx)
            if span is not None:
                candidates.append((order, _Found(match.start(), match.end(), span, rule.name)))
    chosen = _compose_anchored(text, _select(candidates))
    for index, item in enumerate(chosen):
        low = chosen[index - 1].end if index > 0 else 0
        high = chosen[index + 1].start if index + 1 < len(chosen) else len(text)
        _attach_day_part(text, item, low, high)
        _apply_modifiers(text, item, low, high, has_earlier=index > 0)
        _set_cut(text, item, high)
    return chosen


def _select(candidates: list[tuple[int, _Found]]) -> list[_Found]:
    """Longest match wins; among equal lengths, the earlier rule. Result in text order."""
    candidates.sort(key=lambda pair: (pair[1].start - pair[1].end, pair[1].start, pair[0]))
    chosen: list[_Found] = []
    for _, item in candidates:
        if all(item.end <= other.start or item.start >= other.end for other in chosen):
            chosen.append(item)
    chosen.sort(key=lambda item: item.start)
    return chosen


def _compose_anchored(text: str, chosen: list[_Found]) -> list[_Found]:
    """Merge "<unit> before/after <expression>" into one expression counted from the other's dates."""
    out: list[_Found] = []
    for item in chosen:
        start, end = item.span
        low = out[-1].start if out else 0
        anchor = _ANCHORED_EN.search(text, max(low, item.start - 60), item.start)
        span = _count_from(anchor, start, end) if anchor and start and end else None
        if anchor is None or span is None or any(other.start < anchor.start() < other.end for other in out):
            out.append(item)
            continue
        while out and out[-1].start >= anchor.start():
            out.pop()
        out.append(_Found(anchor.start(), item.end, span, "en_anchored"))
    return out


def _count_from(anchor: re.Match[str], start: datetime, end: datetime) -> Span | None:
    """"the Sunday before D" = the latest Sunday before D; "2 weeks after D" = the second week after D's."""
    count = en_number(anchor["n"]) if anchor["n"] else 1
    if count is None:
        return None
    unit = anchor["unit"].lower()
    before = anchor["dir"].lower() == "before"
    first: date = start.date()
    last: date = (end - timedelta(microseconds=1)).date()
    sign = -1 if before else 1
    if unit in rules_en.WEEKDAYS:
        weekday = rules_en.WEEKDAYS[unit]
        base = weekday_on_or_before(first - ONE_DAY, weekday) if before else weekday_after(last, weekday)
        return day_span(base + timedelta(weeks=sign * (count - 1)))
    if unit == "day":
        return day_span(first - timedelta(days=count) if before else last + timedelta(days=count))
    if unit == "week":
        return to_span(*week_days(first if before else last, sign * count))
    if unit == "weekend":
        sunday = weekday_on_or_before(first - ONE_DAY, 6) if before else weekday_after(last, 5) + ONE_DAY
        sunday += timedelta(weeks=sign * (count - 1))
        return to_span(sunday - ONE_DAY, sunday + ONE_DAY)
    if unit == "month":
        base = first if before else last
        year, month = shift_month(base.year, base.month, sign * count)
        return to_span(*month_days(year, month))
    return to_span(*year_days((first if before else last).year + sign * count))


def _is_whole_day(span: Span) -> bool:
    start, end = span
    return start is not None and end is not None and end - start == ONE_DAY and start.hour == start.minute == 0


def _part_key(word: str) -> str:
    if word in _ZH_PART_KEYS:
        return _ZH_PART_KEYS[word]
    lower = word.lower()
    return _EN_PART_KEYS.get(lower, lower)


def _attach_day_part(text: str, item: _Found, low: int, high: int) -> None:
    """Narrow a one-day expression to a part of that day ("yesterday afternoon", "昨天下午")."""
    first = item.span[0]
    if first is None or not _is_whole_day(item.span):
        return
    day: date = first.date()
    for pattern in (_PART_AFTER_EN, _PART_AFTER_ZH):
        match = pattern.match(text, item.end, high)
        if match and _part_key(match["part"]) in DAY_PARTS:
            item.span, item.end = hours_span(day, _part_key(match["part"])), match.end()
            return
    before = _PART_BEFORE_EN.search(text, max(low, item.start - 40), item.start)
    if before:
        item.span, item.start = hours_span(day, before["part"].lower()), before.start()


def _apply_modifiers(text: str, item: _Found, low: int, high: int, *, has_earlier: bool) -> None:
    """Open one side for "since/before/after/until" (以来/之前/之后), and take in a leading preposition."""
    start, end = item.span
    window = max(low, item.start - 20)
    modifier = _MODIFIER_EN.search(text, window, item.start)
    if modifier:
        mod = " ".join(modifier["mod"].lower().split())
        if mod in ("until", "till", "til", "up to") and has_earlier:
            item.start = modifier.start()  # why: "from May until July" is the whole stretch, not open-ended
            return
        item.span = _open_side(mod, start, end)
        item.start = modifier.start()
        return
    if _apply_zh_modifiers(text, item, low, high):
        return
    preposition = _PREPOSITION_EN.search(text, window, item.start) or _PREPOSITION_ZH.search(text, window, item.start)
    if preposition:
        item.cut_start = preposition.start()


def _set_cut(text: str, item: _Found, high: int) -> None:
    """The span `remainder` drops: the expression, a preposition before it, a 的 after it ("上周的会议")."""
    item.cut_start = item.start if item.cut_start < 0 else min(item.cut_start, item.start)
    item.cut_end = item.end
    tail = _TAIL_ZH.match(text, item.end, high)
    if tail:
        item.cut_end = tail.end()


def _apply_zh_modifiers(text: str, item: _Found, low: int, high: int) -> bool:
    start, end = item.span
    before = _MODIFIER_ZH_BEFORE.search(text, max(low, item.start - 6), item.start)
    after = _MODIFIER_ZH_AFTER.match(text, item.end, high)
    after_mod = after["mod"] if after else ""
    if before and (before["mod"] != "从" or after_mod in ("起", "开始", "以来", "至今")):
        kind = "until" if before["mod"] in ("截至", "截止到", "截止", "直到") else "since"
        item.span = _open_side(kind, start, end)
        item.start = before.start()
        if after is not None and after_mod in ("起", "开始", "以来", "至今"):
            item.end = after.end()
        return True
    if after is None:
        return False
    if after_mod in ("以来", "至今"):
        kind = "since"
    elif after_mod in ("之前", "以前", "前"):
        kind = "before"
    elif after_mod in ("之后", "以后", "后"):
        kind = "after"
    else:
        return False
    item.span = _open_side(kind, start, end)
    item.end = after.end()
    return True


def _open_side(mod: str, start: datetime | None, end: datetime | None) -> Span:
    if mod in ("since", "ever since"):
        return start, None
    if mod == "after":
        return end, None
    if mod in ("before", "prior to"):
        return None, start
    return None, end  # until / till / up to


def _union(spans: list[Span], zone: tzinfo | None) -> TimeRange:
    """Hull of all spans; an open side anywhere keeps the union open on that side."""
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    known_starts = [value for value in starts if value is not None]
    known_ends = [value for value in ends if value is not None]
    start = min(known_starts) if len(known_starts) == len(starts) else None
    end = max(known_ends) if len(known_ends) == len(ends) else None
    return TimeRange(
        start=start.replace(tzinfo=zone) if start is not None else None,
        end=end.replace(tzinfo=zone) if end is not None else None,
    )


def _remove(text: str, found: list[_Found]) -> str:
    """The text without the expressions; a space stands in for a cut only between non-CJK characters."""
    out, cursor = "", 0
    for item in found:
        out += text[cursor:item.cut_start]
        cursor = item.cut_end
        following = text[cursor:cursor + 1]
        if out and following and not (_CJK.match(out[-1]) or _CJK.match(following)):
            out += " "
    out += text[cursor:]
    return _tidy(out)


def _tidy(text: str) -> str:
    text = _TIDY_SPACE.sub(" ", text).strip()
    text = _TIDY_CJK_GAP.sub("", text)
    text = _TIDY_BEFORE_PUNCT.sub(r"\1", text)
    text = _TIDY_DANGLING.sub("", text)
    return _TIDY_LEADING.sub("", text).strip()
