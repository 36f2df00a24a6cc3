"""Language-neutral time rules: numeric dates such as 2023-05-08, 05/08/2023, 08.05.2023."""

from __future__ import annotations

import re

from .calendar_math import Context, Rule, Span, day_span, safe_date


def _iso(match: re.Match[str], ctx: Context) -> Span | None:
    day = safe_date(int(match["y"]), int(match["m"]), int(match["d"]))
    return day_span(day) if day else None


def _slashed(match: re.Match[str], ctx: Context) -> Span | None:
    """mm/dd/yyyy (US order); dd/mm/yyyy when the first number cannot be a month."""
    first, second = int(match["a"]), int(match["b"])
    year = int(match["y"])
    if year < 100:
        year += 2000
    month, day = (second, first) if first > 12 >= second else (first, second)
    found = safe_date(year, month, day)
    return day_span(found) if found else None


def _dotted(match: re.Match[str], ctx: Context) -> Span | None:
    """dd.mm.yyyy (European order)."""
    found = safe_date(int(match["y"]), int(match["b"]), int(match["a"]))
    return day_span(found) if found else None


RULES: tuple[Rule, ...] = (
    Rule(
        "num_iso_date",
        re.compile(r"(?<![\d.])(?P<y>\d{4})(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})(?![\d])"),
        _iso,
    ),
    # why: slashes are read month first (US), as most English text here is; 13/05/2023 falls back to day first.
    Rule(
        "num_slashed_date",
        re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})(?![\d/])"),
        _slashed,
    ),
    Rule("num_dotted_date", re.compile(r"(?<![\d.])(?P<a>\d{1,2})\.(?P<b>\d{1,2})\.(?P<y>\d{4})(?![\d.])"), _dotted),
)
