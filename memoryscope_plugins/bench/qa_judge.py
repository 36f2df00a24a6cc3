"""The judge of `bench qa`: deterministic checks first, an LLM only for what they cannot decide.

`deterministic_verdict` decides an answer without a model when a rule is sure:

* ``empty``: no answer at all -> WRONG;
* ``exact`` / ``contains``: the normalised gold answer is the answer, or appears in it as whole
  words (characters for Chinese) -> CORRECT, unless the answer hedges ("I don't know", "not
  mentioned", "不知道"), negates where the gold does not ("No, ... yes"), lists several items or
  is far longer than the gold (a list of guesses): those go to the LLM;
* ``content_words``: the same guards, and every content word of an English gold (stemmed; number
  words as digits; filler such as "stuff", "nearly", "about" and function words left out)
  appears in the answer in the same order ("Harry Potter series" for "The Harry Potter
  stuff", "4 months" for "nearly four months") -> CORRECT;
* ``date``: the gold answer is only a date ("7 May 2023", "May 2023", "2022", "2023年5月7日")
  and every date the answer names lies inside it, in any format ("2023-05-07", "May 7th,
  2023") -> CORRECT; every date the answer names lies outside it -> WRONG (``date_mismatch``);
  an answer with relative words ("the day before 7 May 2023", "last week") goes to the LLM;
* ``relative_date``: the gold answer is "the week/weekend/day/<weekday> before|after <date>"
  (LoCoMo's style) and every date of the answer lies in the period that resolves to -> CORRECT;
* ``in_gold_core`` (Chinese): the same guards, and the short answer (at least two characters,
  Chinese numerals read as digits: 六百二十一 = 621, 四百一 = 410) is part of the gold's main
  statement: its first sentence or clause before "；", with bracketed remarks removed ("护士" for
  "华西医院的护士", "成都" for "在成都过年，因为……"). The main statement only: Chinese golds go on
  with what used to be true ("之前是电商公司的UI设计师", "以前一个人住在眉山老家"), which a stale
  answer would otherwise match.

* ``no_answer``: the answer says it does not know or that the memory does not say ("I don't
  know", "not mentioned", "没有提到") and holds nothing of the gold beyond the question's words
  -> WRONG (every LoCoMo question of categories 1-4 has an answer);
* ``date`` also for days without a year ("Aug 15th", "5月20日"), compared on month and day;
* ``several_candidates``: different dates or numbers offered as alternatives ("13 or 14 April",
  "2 or 3 times", "三次或四次") where the gold gives none -> WRONG;
* ``yes_no_mismatch``: a yes/no gold ("Likely no; ...", "不上了，...") answered the other way round
  -> WRONG (the same way round is left to the other rules);
* ``number`` / ``number_mismatch``: a gold that is only a number ("two", "nearly three months",
  "三次") against a short answer without bounds: all its numbers the gold's -> CORRECT; none ->
  WRONG, unless the units differ (times are converted: "12 weeks" for "3 months" goes on);
* ``contains`` also for an answer far longer than the gold when the gold has four words or more
  (six Chinese characters) and is found whole;
* ``list`` / ``list_partial``: a gold that is a short list ("Oliver, Luna, Bailey", "游泳、瑜伽")
  -> every item named: CORRECT; some named and another not even by its last word: WRONG.

Everything else goes to the LLM with `judge_messages` (English or Chinese, after the gold
answer's language), whose reply `parse_verdict` reads robustly (prose around the word, lower
case, 正确/错误, a JSON label).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from .qa_metrics import contains, is_chinese, normalise_en, tokens

_MONTHS = {name: number for number, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")], start=1) for name in names}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|" \
         r"jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
# (pattern, groups -> (year, month, day)); tried in this order, matched spans are consumed
_DATE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b{_YEAR}[-/.](\d{{1,2}})[-/.](\d{{1,2}})\b"), "ymd"),
    (re.compile(r"((?:19|20)\d{2})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "ymd"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE), "mdy"),
    (re.compile(r"((?:19|20)\d{2})\s*年\s*(\d{1,2})\s*月"), "ym"),
    (re.compile(rf"\b{_YEAR}[-/](\d{{1,2}})\b"), "ym"),
    (re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE), "my"),
    (re.compile(r"((?:19|20)\d{2})\s*年"), "y"),
    (re.compile(rf"\b{_YEAR}\b"), "y"),
]
_RELATIVE_WORDS = re.compile(
    r"\b(before|after|ago|last|next|yesterday|tomorrow|today|previous|earlier|later|week|weekend|since|"
    r"recently|this)\b|[前后昨明今上下]|本周|这周", re.IGNORECASE)
_HEDGES = re.compile(
    r"\b(not sure|unsure|don'?t know|do not know|unknown|not mentioned|no information|not specified|"
    r"cannot (?:be )?determine|can'?t (?:be )?determine|unclear|no mention|not provided|maybe|perhaps|"
    r"possibly|either|or)\b|不知道|不清楚|没有提到|未提及|无法确定|不确定|也许|可能|或者|还是", re.IGNORECASE)
_NEGATION = re.compile(r"\b(no|not|never|none|nothing|neither|nor)\b|n't\b|[不没未无别]", re.IGNORECASE)
_NUMBER_WORDS = {word: str(number) for number, word in enumerate([
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve"])}
_FILLER_WORDS = frozenset({
    "stuff", "thing", "things", "something", "some", "kind", "sort", "of", "to", "in", "on", "at", "for",
    "with", "by", "from", "as", "her", "his", "their", "he", "she", "they", "it", "its", "is", "was", "were",
    "are", "be", "been", "being", "that", "this", "these", "those", "very", "nearly", "almost", "about",
    "around", "roughly", "approximately", "just", "also", "really", "probably", "likely"})
_BRACKETED = re.compile(r"\([^()]*\)|（[^（）]*）")
_SEPARATORS = re.compile(r"[,;、，；]")
_DATE_FILLER = {"on", "in", "around", "about", "approximately", "of", "during", "circa", "year", "month", "day",
                "sometime", "at", "early", "mid", "late", "s"}
_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_RELATIVE_GOLD = re.compile(
    r"^(?:on\s+)?(?:the\s+)?(?:(two|2)\s+)?(day|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)s?\s+(before|after|of)\s+(.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Period:
    """A date at some granularity, as the inclusive days [first, last]."""

    first: date
    last: date

    def within(self, other: Period) -> bool:
        return other.first <= self.first and self.last <= other.last

    def overlaps(self, other: Period) -> bool:
        return self.first <= other.last and other.first <= self.last


def _period(year: int, month: int | None = None, day: int | None = None) -> Period | None:
    try:
        if month is None:
            return Period(date(year, 1, 1), date(year, 12, 31))
        if day is None:
            first = date(year, month, 1)
            following = date(year + (month == 12), month % 12 + 1, 1)
            return Period(first, following - timedelta(days=1))
        return Period(date(year, month, day), date(year, month, day))
    except ValueError:
        return None


def find_dates(text: str) -> tuple[list[Period], str]:
    """The explicit dates a text names (any common English, ISO or Chinese format) and the text
    with them removed."""
    found: list[Period] = []
    rest = text
    for pattern, shape in _DATE_PATTERNS:
        def take(match: re.Match[str], shape: str = shape) -> str:
            g = match.groups()
            if shape == "ymd":
                value = _period(int(g[0]), int(g[1]), int(g[2]))
            elif shape == "dmy":
                value = _period(int(g[2]), _MONTHS[g[1].lower()], int(g[0]))
            elif shape == "mdy":
                value = _period(int(g[2]), _MONTHS[g[0].lower()], int(g[1]))
            elif shape == "ym":
                value = _period(int(g[0]), int(g[1]))
            elif shape == "my":
                value = _period(int(g[1]), _MONTHS[g[0].lower()])
            else:
                value = _period(int(g[0]))
            if value is None:
                return match.group(0)
            found.append(value)
            return " "
        rest = pattern.sub(take, rest)
    return found, rest


def _only_date(gold: str) -> Period | None:
    """The gold answer's period when the gold is nothing but one date (a remark in brackets
    aside: "2025年1月1日（元旦）")."""
    periods, rest = find_dates(_BRACKETED.sub(" ", gold))
    if len(periods) != 1:
        return None
    leftover = re.sub(r"[\s,.;:!?()，。、；：]+", " ", rest).strip().lower()
    if any(word not in _DATE_FILLER for word in leftover.split()):
        return None
    return periods[0]


def relative_gold_period(gold: str) -> Period | None:
    """The days a LoCoMo-style relative gold answer names: "The week before 9 June 2023" is 2-8
    June, "the sunday before 25 May 2023" is 21 May, "the weekend of ..." that weekend."""
    match = _RELATIVE_GOLD.match(gold.strip().rstrip("."))
    if not match:
        return None
    count_word, unit, relation, anchor_text = match.groups()
    anchor = _only_date(anchor_text)
    if anchor is None or anchor.first != anchor.last:
        return None
    day, unit, relation = anchor.first, unit.lower(), relation.lower()
    steps = 2 if count_word else 1
    if unit == "day" and relation != "of":
        shift = timedelta(days=steps)
        target = day - shift if relation == "before" else day + shift
        return Period(target, target)
    if unit == "week":
        if relation == "of":
            start = day - timedelta(days=day.weekday())
            return Period(start, start + timedelta(days=6))
        span = timedelta(days=7 * steps)
        return Period(day - span, day - timedelta(days=1)) if relation == "before" else \
            Period(day + timedelta(days=1), day + span)
    if unit == "weekend":
        if relation == "of":
            saturday = day + timedelta(days=(5 - day.weekday()) % 7) if day.weekday() < 5 else \
                day - timedelta(days=day.weekday() - 5)
            return Period(saturday, saturday + timedelta(days=1))
        if relation == "before":
            saturday = day - timedelta(days=(day.weekday() - 5) % 7 or 7)
            saturday -= timedelta(days=7 * (steps - 1))
        else:
            saturday = day + timedelta(days=(5 - day.weekday()) % 7 or 7)
            saturday += timedelta(days=7 * (steps - 1))
        return Period(saturday, saturday + timedelta(days=1))
    if unit in _WEEKDAYS and relation != "of":
        target_day = _WEEKDAYS[unit]
        if relation == "before":
            target = day - timedelta(days=(day.weekday() - target_day) % 7 or 7)
            target -= timedelta(days=7 * (steps - 1))
        else:
            target = day + timedelta(days=(target_day - day.weekday()) % 7 or 7)
            target += timedelta(days=7 * (steps - 1))
        return Period(target, target)
    return None


@dataclass(frozen=True)
class Verdict:
    correct: bool
    rule: str  # the deterministic rule that decided, or "llm"


def deterministic_verdict(answer: str, gold: str, question: str = "") -> Verdict | None:
    """A verdict a rule is sure of (see the module docstring), or None: ask the LLM. `question`
    (optional) keeps the words an answer only repeats from it from counting as the gold's."""
    text = answer.strip()
    if not text:
        return Verdict(False, "empty")
    hedged = bool(_HEDGES.search(text))
    chinese = is_chinese(gold)
    gold_tokens = tokens(gold, chinese)
    answer_tokens = tokens(text, chinese)
    if gold_tokens and answer_tokens == gold_tokens:
        return Verdict(True, "exact")
    if not chinese and normalise_en(text) == normalise_en(gold) and normalise_en(gold):
        return Verdict(True, "exact")
    if _NO_ANSWER.search(text) and not _shares_gold(text, gold, question, chinese):
        return Verdict(False, "no_answer")
    answer_dates, rest = find_dates(text)
    answer_days = find_month_days(rest)
    gold_period = _only_date(gold)
    gold_day = _only_month_day(gold) if gold_period is None else None
    # "the day before 7 May 2023" names 7 May but means the 6th: relative answers go to the LLM
    relative_answer = bool(_RELATIVE_WORDS.search(text))
    several = _several_candidates(text, answer_dates, gold)
    if several is not None:
        return several
    if (gold_period is not None or gold_day is not None) and (answer_dates or answer_days) and not hedged:
        if relative_answer:
            return None
        return _date_verdict(answer_dates, answer_days, gold_period, gold_day)
    relative = relative_gold_period(gold) if gold_period is None and gold_day is None else None
    if relative is not None and answer_dates and not hedged and not relative_answer \
            and all(p.within(relative) for p in answer_dates):
        return Verdict(True, "relative_date")
    if not hedged:
        polarity = _yes_no_verdict(text, gold, chinese)
        if polarity is not None:
            return polarity
    long_answer = len(answer_tokens) > 3 * len(gold_tokens) + 12
    listing = len(_SEPARATORS.findall(text)) - len(_SEPARATORS.findall(gold)) >= 2  # a list of guesses
    negated = bool(_NEGATION.search(text)) and not _NEGATION.search(gold)  # "No, ... yes"
    if hedged or gold_period is not None or gold_day is not None:
        return None
    # a gold of four words or more found whole is no chance match: the model's sentences around
    # it, commas included, are fine
    if not negated and len(answer_tokens) <= 80 and _phrase_gold(gold, chinese) and contains(text, gold):
        return Verdict(True, "contains")
    if listing:
        return None
    number = _number_verdict(text, gold, chinese)
    if number is not None:
        return number
    if negated or long_answer:
        return None
    if contains(text, gold):
        return Verdict(True, "contains")
    if not chinese and _in_order(_content_words(gold), _content_words(text)):
        return Verdict(True, "content_words")
    items = _list_verdict(text, gold, chinese)
    if items is not None:
        return items
    if chinese:
        core = _compact_zh(gold_core_zh(gold))
        short = _compact_zh(text)
        if len(short) >= 2 and short in core:
            return Verdict(True, "in_gold_core")
    return None


# -- the rules' parts ---------------------------------------------------------------------------

# the answer says it has no answer: every LoCoMo question of categories 1-4 has one
_NO_ANSWER = re.compile(
    r"\b(?:don'?t know|do not know|not sure|unsure|unknown|no (?:relevant |specific |such )?(?:information|info|"
    r"details?|record|mention|memor(?:y|ies))|not (?:mentioned|specified|stated|provided|given|recorded|available|"
    r"known|clear)|(?:is|are|was|were)n'?t (?:mentioned|specified|stated|provided)|(?:does|do|did)(?: not|n'?t) "
    r"(?:say|mention|specify|state|provide|include|contain|tell|know|remember|recall)|cannot (?:be )?(?:determined?|"
    r"answered|found|known|tell|say)|can'?t (?:be )?(?:determined?|answered|tell|say)|unable to (?:determine|find|"
    r"answer|tell))\b|不知道|不清楚|不确定|没有?提到|未提到|未提及|没有提及|没有?说(?:明|过|到)?|没有相关|没有记录|未记录|"
    r"无法确定|无法得知|无法回答|无法判断|无从得知|没有具体|未说明|记忆中没有|没有信息|未知", re.IGNORECASE)
_OR = re.compile(r"\bor\b|\beither\b|或|还是", re.IGNORECASE)
_EN_NUMBER = r"(?:\d+(?:\.\d+)?|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_NUMBER_OR_NUMBER = re.compile(rf"\b{_EN_NUMBER}\b[^.;,]{{0,20}}?\bor\b\s*{_EN_NUMBER}\b|"
                               r"[\d零一二两三四五六七八九十百千]+[^。；，]{0,6}?(?:或|还是)[\d零一二两三四五六七八九十百千]+",
                               re.IGNORECASE)
_YES_NO_EN = re.compile(r"^\W*(?:(?:most |very |quite )?(?:likely|probably|definitely|certainly)[,\s]+)?"
                        r"(yes|yeah|yep|no|nope)\b(?!\s+(?:one|longer)\b)", re.IGNORECASE)
_ZH_HEDGE_START = r"^\W*(?:可能|应该|大概|也许)?"
_YES_ZH = re.compile(_ZH_HEDGE_START + r"(?:是|对|会|有|能|可以|当然|肯定)(?:的|啊|呀)?(?:[，。,.！!；;]|$)")
_NO_ZH = re.compile(_ZH_HEDGE_START + r"(?:不是|不会|不能|不对|不行|没有|不再|并不|并没|否|"
                    r"不[，。,.！!；;]|没[，。,.！!；;]|不[\u4e00-\u9fff]了)")
_APPROX_EN = frozenset({"nearly", "almost", "about", "around", "approximately", "roughly", "some", "just", "only",
                        "exactly", "precisely"})
_COMPARING_EN = frozenset({"more", "less", "over", "under", "than", "least", "most", "fewer", "few", "several",
                           "couple", "or", "to", "between", "up"})
_TIME_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365,
                   "天": 1, "周": 7, "星期": 7, "个月": 30, "月": 30, "年": 365}
_ZH_UNITS_PATTERN = "个月|星期|个|次|天|周|年|岁|月|小时|分钟|公里|斤|块|元|本|只|位|人|遍|趟|场|种|件"
_ZH_NUMBER_GOLD = re.compile(rf"^(\d+)({_ZH_UNITS_PATTERN})?$")
_ZH_BOUND = re.compile(r"多|以上|以下|超过|不到|至少|最多|几")
_ZH_APPROX = re.compile(r"大约|大概|将近|差不多|接近|约|左右|近|快")
_ZH_SMALL_NUMBER = re.compile(rf"[一二两三四五六七八九](?={_ZH_UNITS_PATTERN})")
_NOT_A_LIST_WORD = frozenset({
    "i", "you", "he", "she", "it", "we", "they", "is", "are", "was", "were", "be", "been", "has", "have", "had",
    "do", "does", "did", "will", "would", "can", "could", "should", "not", "but", "because", "since", "so", "yes",
    "no", "that", "which", "who", "likely", "probably", "or"})
_MONTH_DAY_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b{_MONTH}\s+{_DAY}\b", re.IGNORECASE), "md"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?![a-z])", re.IGNORECASE), "dm"),
    (re.compile(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "md_zh"),
]


def find_month_days(text: str) -> list[tuple[int, int]]:
    """The days a text names without a year ("August 15th", "15 Aug", "8月15日") as (month, day);
    run it on what `find_dates` left, so dates with a year are not read twice."""
    found: list[tuple[int, int]] = []
    rest = text
    for pattern, shape in _MONTH_DAY_PATTERNS:
        def take(match: re.Match[str], shape: str = shape) -> str:
            g = match.groups()
            if shape == "md":
                month, day = _MONTHS[g[0].lower()], int(g[1])
            elif shape == "dm":
                month, day = _MONTHS[g[1].lower()], int(g[0])
            else:
                month, day = int(g[0]), int(g[1])
            try:
                date(2000, month, day)  # a leap year: 29 February is a day
            except ValueError:
                return match.group(0)
            found.append((month, day))
            return " "
        rest = pattern.sub(take, rest)
    return found


def _only_month_day(gold: str) -> tuple[int, int] | None:
    """The gold's day when the gold is nothing but a day without a year ("Aug 15th", "5月20日")."""
    periods, rest = find_dates(_BRACKETED.sub(" ", gold))
    if periods:
        return None
    days = find_month_days(rest)
    if len(days) != 1:
        return None
    _, leftover = days[0], rest
    for pattern, _shape in _MONTH_DAY_PATTERNS:
        leftover = pattern.sub(" ", leftover)
    words = re.sub(r"[\s,.;:!?()，。、；：]+", " ", leftover).strip().lower().split()
    return days[0] if all(word in _DATE_FILLER for word in words) else None


def _date_verdict(answer_dates: list[Period], answer_days: list[tuple[int, int]], gold_period: Period | None,
                  gold_day: tuple[int, int] | None) -> Verdict | None:
    """Every date the answer names against a gold that is only a date: each one inside the gold
    (at the precision both give: a day without a year against the gold's day or month) is
    right, each one outside it wrong; all right: CORRECT, all wrong: WRONG, else the LLM."""
    marks: list[bool | None] = []
    for period in answer_dates:
        if gold_period is not None:
            marks.append(True if period.within(gold_period) else False if not period.overlaps(gold_period) else None)
        else:
            assert gold_day is not None
            days = {(day.month, day.day) for day in _days(period)}
            marks.append(None if len(days) > 1 and gold_day in days else days == {gold_day})
    for month, day in answer_days:
        if gold_day is not None:
            marks.append((month, day) == gold_day)
        elif gold_period is not None and gold_period.first.year == gold_period.last.year \
                and gold_period.first.month == gold_period.last.month:
            marks.append(month == gold_period.first.month and (
                gold_period.first == gold_period.last and day == gold_period.first.day
                or gold_period.first != gold_period.last))
        else:
            marks.append(None)  # a day without a year against a whole year: the LLM
    if marks and all(mark is True for mark in marks):
        return Verdict(True, "date")
    if marks and all(mark is False for mark in marks):
        return Verdict(False, "date_mismatch")
    return None


def _days(period: Period) -> list[date]:
    span = (period.last - period.first).days
    return [period.first + timedelta(days=n) for n in range(min(span, 366) + 1)]


def _several_candidates(text: str, answer_dates: list[Period], gold: str) -> Verdict | None:
    """An answer that offers different dates or numbers as alternatives ("13 or 14 April 2024",
    "2 or 3 times", "三次或四次") has not answered: WRONG, unless the gold itself gives
    alternatives."""
    if not _OR.search(text) or _OR.search(gold):
        return None
    if len(set(answer_dates)) >= 2 or _NUMBER_OR_NUMBER.search(text):
        return Verdict(False, "several_candidates")
    return None


def _polarity(text: str, chinese: bool) -> bool | None:
    """True for an answer that starts with yes ("Yes, ...", "Likely yes", "是的"), False for no
    ("No", "Likely no", "不会", "不上了"), else None."""
    if chinese:
        if _NO_ZH.search(text):
            return False
        return True if _YES_ZH.search(text) else None
    match = _YES_NO_EN.search(text)
    if not match:
        return None
    return match.group(1).lower() in ("yes", "yeah", "yep")


def _yes_no_verdict(text: str, gold: str, chinese: bool) -> Verdict | None:
    """A yes/no gold answered the other way round is WRONG (`yes_no_mismatch`); the same way round
    is left to the other rules (the gold may ask for more than the yes)."""
    gold_says = _polarity(gold, chinese)
    answer_says = _polarity(text, chinese or is_chinese(text))
    if gold_says is None or answer_says is None or gold_says == answer_says:
        return None
    return Verdict(False, "yes_no_mismatch")


def _en_numbers(text: str) -> tuple[list[tuple[float, str | None]], int]:
    """The numbers of an English text with the word after each (its unit), and the word count."""
    words = [_NUMBER_WORDS.get(word, word) for word in normalise_en(text).split()]
    found = []
    for index, word in enumerate(words):
        if re.fullmatch(r"\d+(?:\.\d+)?", word):
            unit = words[index + 1] if index + 1 < len(words) else None
            found.append((float(word), _unit(unit)))
    return found, len(words)


def _unit(word: str | None) -> str | None:
    if not word:
        return None
    word = word.lower()
    for unit in ("day", "week", "month", "year"):
        if word in (unit, unit + "s"):
            return unit
    return tokens(word, False)[0] if tokens(word, False) else None


def _zh_numbers(text: str) -> list[tuple[float, str | None]]:
    compact = _ZH_SMALL_NUMBER.sub(lambda m: str(_ZH_DIGITS[m.group(0)]), zh_numerals_to_digits(text))
    return [(float(number), unit or None) for number, unit in re.findall(
        rf"(\d+(?:\.\d+)?)({_ZH_UNITS_PATTERN})?", compact)]


def _number_verdict(text: str, gold: str, chinese: bool) -> Verdict | None:
    """A gold that is only a number (with a unit and "nearly"/"about" at most: "3", "two",
    "nearly three months", "三次") against a short answer without bounds ("more than"): every
    number of the answer the gold's, in the gold's unit or none, is CORRECT (`number`: "3次" for
    "三次"); none of them the gold's is WRONG (`number_mismatch`), when the units agree or are
    both times whose lengths differ by more than a quarter ("2 weeks" for "nearly three
    months")."""
    if chinese:
        compact = _ZH_APPROX.sub("", _compact_zh(gold))
        compact = _ZH_SMALL_NUMBER.sub(lambda m: str(_ZH_DIGITS[m.group(0)]), compact)
        match = _ZH_NUMBER_GOLD.match(compact)
        if not match or len(_compact_zh(text)) > 16:
            return None
        gold_number, gold_unit = float(match.group(1)), match.group(2)
        if _ZH_BOUND.search(text):
            return None
        answer_numbers = _zh_numbers(text)
    else:
        words = [_NUMBER_WORDS.get(word, word) for word in normalise_en(gold).split() if word not in _APPROX_EN]
        if not 1 <= len(words) <= 3 or not re.fullmatch(r"\d+(?:\.\d+)?", words[0]) \
                or any(word in _COMPARING_EN for word in words) or find_dates(gold)[0]:
            return None
        gold_number, gold_unit = float(words[0]), _unit(words[1]) if len(words) > 1 else None
        answer_numbers, answer_words = _en_numbers(text)
        if answer_words > 12 or any(word in _COMPARING_EN for word in normalise_en(text).split()):
            return None
    if not answer_numbers:
        return None
    if all(number == gold_number and (unit is None or gold_unit is None or unit == gold_unit)
           for number, unit in answer_numbers):
        return Verdict(True, "number")
    if any(number == gold_number for number, _unit_ in answer_numbers):
        return None
    for number, unit in answer_numbers:
        if gold_unit in _TIME_UNIT_DAYS and unit in _TIME_UNIT_DAYS:
            gold_days, answer_days = gold_number * _TIME_UNIT_DAYS[gold_unit], number * _TIME_UNIT_DAYS[unit]
            if max(gold_days, answer_days) <= 1.25 * min(gold_days, answer_days):
                return None  # "12 weeks" for "3 months": the LLM
        elif gold_unit is not None and unit is not None and unit != gold_unit:
            return None  # other things counted
    return Verdict(False, "number_mismatch")


def _phrase_gold(gold: str, chinese: bool) -> bool:
    """A gold long enough that finding it whole in an answer is no chance: four words or more, or
    six Chinese characters."""
    return len(_compact_zh(gold)) >= 6 if chinese else len(tokens(gold, False)) >= 4


def _list_items(gold: str, chinese: bool) -> list[str]:
    """The items of a gold that is a short list ("Oliver, Luna, Bailey", "Poetry, creative
    writing", "游泳、瑜伽"), or [] for any other gold (a sentence, alternatives, yes/no)."""
    if _OR.search(gold) or ";" in gold or "；" in gold:
        return []
    if chinese:  # "、" only: "，" joins clauses
        core = gold_core_zh(gold)
        if core != _BRACKETED.sub("", gold).strip().rstrip("。") or "、" not in core:
            return []
        items = [_compact_zh(item) for item in re.split(r"[、和]", core) if _compact_zh(item)]
        return items if len(items) >= 2 and all(len(item) <= 8 for item in items) else []
    text = gold.strip().rstrip(".")
    # items between commas ("Oliver, Luna, and Bailey"); without a comma "A and B" of a word or two each
    items = [re.sub(r"^and\s+", "", item.strip(), flags=re.IGNORECASE) for item in text.split(",")] \
        if "," in text else [item.strip() for item in re.split(r"\band\b|&", text, flags=re.IGNORECASE)]
    items = [item for item in items if item]
    longest = 4 if "," in text else 2
    if len(items) < 2:
        return []
    for item in items:
        words = normalise_en(item).split()
        if not 1 <= len(words) <= longest or any(word in _NOT_A_LIST_WORD for word in words) \
                or not _content_words(item):
            return []
    return items


def _list_verdict(text: str, gold: str, chinese: bool) -> Verdict | None:
    """A list gold: every item in the answer is CORRECT (`list`); some items in it and another
    not even by its last word (the head of "a small concert") is WRONG (`list_partial`: "Luna
    and Oliver" for "Oliver, Luna, Bailey"); anything else is for the LLM."""
    items = _list_items(gold, chinese)
    if not items:
        return None
    if chinese:
        answer = _compact_zh(text)
        present = [item in answer for item in items]
        absent = [not found for found in present]
    else:
        answer_words = _content_words(text)
        present = [_in_order(_content_words(item), answer_words) for item in items]
        absent = [_content_words(item)[-1] not in answer_words for item in items]
    if all(present):
        return Verdict(True, "list")
    if any(present) and any(absent):
        return Verdict(False, "list_partial")
    return None


def _shares_gold(text: str, gold: str, question: str, chinese: bool) -> bool:
    """Whether an answer holds anything of the gold beyond the question's own words: a content
    word (English), two characters in a row (Chinese), or a date; True when the gold has nothing
    the question has not (then nothing can be told)."""
    answer_dates = find_dates(text)[0]
    if any(a.overlaps(g) for a in answer_dates for g in find_dates(gold)[0]):
        return True
    if chinese or is_chinese(text):
        asked = _compact_zh(question)
        gold_pairs = {pair for pair in (_compact_zh(gold)[i:i + 2] for i in range(len(_compact_zh(gold)) - 1))
                      if pair not in asked}
        answer = _compact_zh(text)
        return not gold_pairs or any(pair in answer for pair in gold_pairs)
    gold_words = set(_content_words(gold)) - set(_content_words(question))
    return not gold_words or bool(gold_words & set(_content_words(text)))


_ZH_BRACKETS = re.compile(r"（[^）]*）|\([^)]*\)")
_ZH_CORE_END = re.compile(r"[；;。!?！？]")
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_ZH_NUMERAL_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万]+")


def gold_core_zh(gold: str) -> str:
    """A Chinese gold answer's main statement: bracketed remarks removed, up to the first "；" or
    sentence end."""
    text = _ZH_BRACKETS.sub("", gold)
    return _ZH_CORE_END.split(text, maxsplit=1)[0]


def zh_numerals_to_digits(text: str) -> str:
    """Chinese numbers written with a unit as digits ("六百二十一" -> "621", "四百一" -> "410",
    "十五" -> "15"); runs without a unit ("一起", "三个") are left as they are."""
    def convert(match: re.Match[str]) -> str:
        run = match.group(0)
        if not any(ch in _ZH_UNITS for ch in run):
            return run
        total, section, digit, last_unit, zero = 0, 0, None, None, False
        for ch in run:
            if ch in _ZH_DIGITS:
                digit = _ZH_DIGITS[ch]
                zero = zero or digit == 0
                continue
            unit = _ZH_UNITS[ch]
            if unit == 10000:
                total += (section + (digit or 0)) * unit
                section, digit, last_unit = 0, None, None
                continue
            section += (1 if digit is None else digit) * unit
            digit, last_unit, zero = None, unit, False
        if digit is not None:  # "四百一" is 410, but "一百零五" 105: after 零 a digit counts as units
            section += digit * (last_unit // 10 if last_unit and last_unit >= 100 and not zero else 1)
        return str(total + section)
    return _ZH_NUMERAL_RUN.sub(convert, text)


def _compact_zh(text: str) -> str:
    """Digits for numerals, no punctuation or spaces, lower case (for "UI", "PLUS")."""
    text = zh_numerals_to_digits(text)
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _content_words(text: str) -> list[str]:
    """The stemmed words that carry a short answer's meaning: number words as digits, without
    filler ("stuff", "nearly", "about") and function words."""
    words = [_NUMBER_WORDS.get(word, word) for word in normalise_en(text).split()]
    return tokens(" ".join(word for word in words if word not in _FILLER_WORDS), False)


def _in_order(needle: list[str], haystack: list[str]) -> bool:
    """Every word of `needle` appears in `haystack`, in the same order (gaps allowed)."""
    if not needle:
        return False
    position = 0
    for word in needle:
        try:
            position = haystack.index(word, position) + 1
        except ValueError:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# The LLM judge

JUDGE_EN = """You grade an answer to a question about earlier conversations.

Question: {question}
Gold answer: {gold}
Answer to grade: {answer}
The question was asked on {now}.

Mark CORRECT when the answer says what the gold answer says: other wording, a synonym, a date \
in another format, a more precise date inside the gold's period, or a relative date ("last \
Saturday", "the week before 9 June 2023") that resolves to the gold's date all count, and extra \
details are fine as long as they do not contradict the gold. Mark WRONG when the answer misses \
the gold's point, names a different person, thing, place, number or date, only shares the topic, \
says it does not know, or lists several guesses.

Reply with one word: CORRECT or WRONG."""

JUDGE_ZH = """你要评判一个关于过往对话的问题的回答是否正确。

问题：{question}
标准答案：{gold}
待评判的回答：{answer}
提问日期：{now}

回答与标准答案意思相同即为正确：措辞不同、同义词、日期格式不同、落在标准答案时间范围内的更精确日期、\
能推算到标准答案日期的相对时间（如"上周六"）都算正确；多出的细节只要不与标准答案矛盾也算正确。\
回答没有说到标准答案的要点、说的是别的人/物/地点/数字/日期、只是话题相关、表示不知道、或列出多个猜测，都算错误。

只回复一个词：正确 或 错误。"""

_VERDICT_WORDS = re.compile(r"\bincorrect\b|\bnot correct\b|\bcorrect\b|\bwrong\b|不正确|正确|错误")
_LABELLED = re.compile(r"(?:verdict|label|grade|judgement|judgment|result|判定|结论|评判|结果)\W{0,5}"
                       r"(incorrect|not correct|correct|wrong|不正确|正确|错误)")
_NEGATIVE = {"incorrect", "not correct", "wrong", "不正确", "错误"}


def judge_messages(question: str, gold: str, answer: str, now: str) -> list[dict[str, str]]:
    """The judge's prompt, in the gold answer's language."""
    template = JUDGE_ZH if is_chinese(gold) or is_chinese(question) else JUDGE_EN
    return [{"role": "user", "content": template.format(question=question, gold=gold, answer=answer, now=now)}]


def parse_verdict(text: str) -> bool | None:
    """CORRECT -> True, WRONG -> False, None when the reply gives no clear verdict."""
    cleaned = re.sub(r"<think>.*?</think>", " ", text or "", flags=re.DOTALL).lower()
    cleaned = cleaned.replace("*", "")
    labelled = _LABELLED.search(cleaned)
    if labelled:
        return labelled.group(1) not in _NEGATIVE
    words = _VERDICT_WORDS.findall(cleaned)
    if not words:
        return None
    values = {word not in _NEGATIVE for word in words}
    if len(values) == 1:
        return values.pop()
    first_line = next((line for line in cleaned.splitlines() if line.strip()), "")
    first = _VERDICT_WORDS.findall(first_line)
    if first and len({w not in _NEGATIVE for w in first}) == 1:
        return first[0] not in _NEGATIVE
    return None
