"""Readable dates for memories shown to an LLM, in English and Chinese.

English: "2023-05-08 Mon", "2023-05-08 Mon 14:30", spans "2023-05-01 Mon – 2023-05-07 Sun".
Chinese: "2023年5月8日 周一", "2023年5月8日 周一 14:30", spans "2023年5月1日 – 5月7日".
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from functools import lru_cache

_EN_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ZH_WEEKDAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_DASH = " – "


def _is_zh(language: str) -> bool:
    if not isinstance(language, str):
        raise TypeError(f"language must be a str such as 'en' or 'zh', got {type(language).__name__}")
    return language.lower().startswith("zh")


def _check_moment(value: object, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    return value


def _date_text(moment: datetime, zh: bool, *, with_year: bool = True, with_weekday: bool = True) -> str:
    if zh:
        text = f"{moment.year}年{moment.month}月{moment.day}日" if with_year else f"{moment.month}月{moment.day}日"
        return f"{text} {_ZH_WEEKDAYS[moment.weekday()]}" if with_weekday else text
    text = _iso_day(moment.year, moment.month, moment.day)
    return f"{text} {_EN_WEEKDAYS[moment.weekday()]}" if with_weekday else text


@lru_cache(maxsize=8192)
def _iso_day(year: int, month: int, day: int) -> str:
    """"2023-05-08", as strftime writes it here (a context shows many lines of the same few days)."""
    return date(year, month, day).strftime("%Y-%m-%d")


def format_memory_time(moment: datetime, language: str = "en", *, with_time: bool = False) -> str:
    """The date of a memory: "2023-05-08 Mon" ("2023年5月8日 周一"); with_time adds " 14:30".

    The moment is shown in its own timezone (no conversion).
    """
    _check_moment(moment, "moment")
    text = _date_text(moment, _is_zh(language))
    return f"{text} {moment:%H:%M}" if with_time else text


def _at_midnight(moment: datetime) -> bool:
    return moment.time() == time()


def _day_span_text(start: datetime, last: datetime, zh: bool) -> str:
    if zh:
        tail = _date_text(last, True, with_year=last.year != start.year, with_weekday=False)
        return f"{_date_text(start, True, with_weekday=False)}{_DASH}{tail}"
    return f"{_date_text(start, False)}{_DASH}{_date_text(last, False)}"


def format_time_span(start: datetime, end: datetime | None, language: str = "en") -> str:
    """A readable span for an event range [start, end).

    A single whole day reads like `format_memory_time`; whole days read "2023-05-01 Mon – 2023-05-07 Sun"
    ("2023年5月1日 – 5月7日"); spans with clock times read "2023-05-08 Mon 18:00–22:00" or
    "2023-05-08 Mon 18:00 – 2023-05-09 Tue 06:00". A missing or empty end shows the start alone.
    """
    _check_moment(start, "start")
    zh = _is_zh(language)
    if end is None or _check_moment(end, "end") <= start:
        return format_memory_time(start, language, with_time=not _at_midnight(start))
    if end.tzinfo is not None and start.tzinfo is not None:
        end = end.astimezone(start.tzinfo)
    if _at_midnight(start) and _at_midnight(end):
        last = end - timedelta(days=1)
        if last.date() == start.date():
            return format_memory_time(start, language)
        return _day_span_text(start, last, zh)
    return _clock_span_text(start, end, zh)


def _clock_span_text(start: datetime, end: datetime, zh: bool) -> str:
    head = f"{_date_text(start, zh)} {start:%H:%M}"
    same_day = end.date() == start.date()
    if same_day or (_at_midnight(end) and end.date() == start.date() + timedelta(days=1)):
        stop = "24:00" if not same_day else f"{end:%H:%M}"
        return f"{head}–{stop}"
    tail_date = _date_text(end, zh, with_year=not zh or end.year != start.year)
    return f"{head}{_DASH}{tail_date} {end:%H:%M}"
