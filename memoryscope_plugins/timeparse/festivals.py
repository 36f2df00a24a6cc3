"""Festival dates for the time parser: fixed-date, rule-based and lunar (table) festivals.

Lunar festivals (Spring Festival, Dragon Boat, Qixi, Mid-Autumn, Double Ninth) and Qingming
(a solar term) are looked up in tables for 2000-2040, generated once with the `lunar-python`
package; outside that span they resolve to None. Every festival is a day span
[first day, day after last day).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

DaySpan = tuple[date, date]

_FIRST_TABLE_YEAR = 2000


def _table(packed: str) -> tuple[tuple[int, int], ...]:
    return tuple((int(item[:2]), int(item[2:])) for item in packed.split())


# MMDD per year, 2000..2040 (generated with lunar-python 1.4.8).
_LUNAR_NEW_YEAR = _table(
    "0205 0124 0212 0201 0122 0209 0129 0218 0207 0126 0214 0203 0123 0210 0131 0219 0208 0128 "
    "0216 0205 0125 0212 0201 0122 0210 0129 0217 0206 0126 0213 0203 0123 0211 0131 0219 0208 "
    "0128 0215 0204 0124 0212"
)
_DRAGON_BOAT = _table(
    "0606 0625 0615 0604 0622 0611 0531 0619 0608 0528 0616 0606 0623 0612 0602 0620 0609 0530 "
    "0618 0607 0625 0614 0603 0622 0610 0531 0619 0609 0528 0616 0605 0624 0612 0601 0620 0610 "
    "0530 0618 0607 0527 0614"
)
_QIXI = _table(
    "0806 0825 0815 0804 0822 0811 0731 0819 0807 0826 0816 0806 0823 0813 0802 0820 0809 0828 "
    "0817 0807 0825 0814 0804 0822 0810 0829 0819 0808 0826 0816 0805 0824 0812 0801 0820 0810 "
    "0828 0817 0807 0826 0814"
)
_MID_AUTUMN = _table(
    "0912 1001 0921 0911 0928 0918 1006 0925 0914 1003 0922 0912 0930 0919 0908 0927 0915 1004 "
    "0924 0913 1001 0921 0910 0929 0917 1006 0925 0915 1003 0922 0912 1001 0919 0908 0927 0916 "
    "1004 0924 0913 1002 0920"
)
_DOUBLE_NINTH = _table(
    "1006 1025 1014 1004 1022 1011 1030 1019 1007 1026 1016 1005 1023 1013 1002 1021 1009 1028 "
    "1017 1007 1025 1014 1004 1023 1011 1029 1018 1008 1026 1016 1005 1024 1012 1001 1020 1009 "
    "1027 1017 1007 1026 1014"
)
_QINGMING = _table(
    "0404 0405 0405 0405 0404 0405 0405 0405 0404 0404 0405 0405 0404 0404 0405 0405 0404 0404 "
    "0405 0405 0404 0404 0405 0405 0404 0404 0405 0405 0404 0404 0405 0405 0404 0404 0405 0405 "
    "0404 0404 0405 0405 0404"
)


def _from_table(table: tuple[tuple[int, int], ...], year: int) -> date | None:
    index = year - _FIRST_TABLE_YEAR
    if not 0 <= index < len(table):
        return None
    month, day = table[index]
    return date(year, month, day)


def _fixed(month: int, day: int, length: int = 1) -> Callable[[int], DaySpan | None]:
    def span(year: int) -> DaySpan | None:
        first = date(year, month, day)
        return first, first + timedelta(days=length)

    return span


def _lunar(table: tuple[tuple[int, int], ...], offset: int = 0, length: int = 1) -> Callable[[int], DaySpan | None]:
    def span(year: int) -> DaySpan | None:
        base = _from_table(table, year)
        if base is None:
            return None
        first = base + timedelta(days=offset)
        return first, first + timedelta(days=length)

    return span


def _nth_weekday(month: int, weekday: int, nth: int) -> Callable[[int], DaySpan | None]:
    """The nth (1-based) given weekday (Monday=0) of a month, e.g. Thanksgiving = 4th Thursday of November."""

    def span(year: int) -> DaySpan | None:
        first = date(year, month, 1)
        day = first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (nth - 1))
        return day, day + timedelta(days=1)

    return span


def easter(year: int) -> date:
    """Western Easter Sunday (anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    weekday_shift = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * weekday_shift) // 451
    month, day = divmod(h + weekday_shift - 7 * m + 114, 31)
    return date(year, month, day + 1)


def _easter(year: int) -> DaySpan | None:
    day = easter(year)
    return day, day + timedelta(days=1)


# Canonical festival keys -> span for a given year.
# why: holiday "weeks" are given their usual extent: Spring Festival = the first 7 days of the
# lunar year (初一-初七), National Day = Oct 1-7 (Golden Week), Labour Day = May 1-5.
FESTIVALS: dict[str, Callable[[int], DaySpan | None]] = {
    "spring_festival": _lunar(_LUNAR_NEW_YEAR, 0, 7),
    "lunar_new_year_day": _lunar(_LUNAR_NEW_YEAR, 0, 1),
    "lunar_new_year_eve": _lunar(_LUNAR_NEW_YEAR, -1, 1),
    "lantern": _lunar(_LUNAR_NEW_YEAR, 14, 1),
    "qingming": _lunar(_QINGMING),
    "dragon_boat": _lunar(_DRAGON_BOAT),
    "qixi": _lunar(_QIXI),
    "mid_autumn": _lunar(_MID_AUTUMN),
    "double_ninth": _lunar(_DOUBLE_NINTH),
    "new_year_day": _fixed(1, 1),
    "valentine": _fixed(2, 14),
    "womens_day": _fixed(3, 8),
    "labour_day": _fixed(5, 1, 5),
    "childrens_day": _fixed(6, 1),
    "independence_day": _fixed(7, 4),
    "teachers_day": _fixed(9, 10),
    "national_day": _fixed(10, 1, 7),
    "halloween": _fixed(10, 31),
    "singles_day": _fixed(11, 11),
    "christmas_eve": _fixed(12, 24),
    "christmas": _fixed(12, 25),
    "new_year_eve": _fixed(12, 31),
    "thanksgiving": _nth_weekday(11, 3, 4),
    "mothers_day": _nth_weekday(5, 6, 2),
    "fathers_day": _nth_weekday(6, 6, 3),
    "easter": _easter,
}


def festival_span(key: str, year: int) -> DaySpan | None:
    """The day span of festival `key` in `year`, or None when unknown (e.g. a lunar year off the table)."""
    if not 1 <= year <= 9998:
        return None
    return FESTIVALS[key](year)
