"""Tests for the readable memory dates of timeparse.formatting."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memoryscope_plugins.timeparse.formatting import format_memory_time, format_time_span  # noqa: E402

MOMENT = datetime(2023, 5, 8, 14, 30)  # a Monday


@pytest.mark.parametrize(
    ("language", "with_time", "expected"),
    [
        ("en", False, "2023-05-08 Mon"),
        ("en", True, "2023-05-08 Mon 14:30"),
        ("zh", False, "2023年5月8日 周一"),
        ("zh", True, "2023年5月8日 周一 14:30"),
        ("zh-CN", False, "2023年5月8日 周一"),
    ],
)
def test_format_memory_time(language: str, with_time: bool, expected: str) -> None:
    assert format_memory_time(MOMENT, language, with_time=with_time) == expected


def test_default_language_is_english() -> None:
    assert format_memory_time(datetime(2026, 11, 22)) == "2026-11-22 Sun"


def test_every_weekday_name() -> None:
    monday = datetime(2026, 11, 16)
    en = [format_memory_time(monday + timedelta(days=i)).split()[1] for i in range(7)]
    zh = [format_memory_time(monday + timedelta(days=i), "zh").split()[1] for i in range(7)]
    assert en == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert zh == ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]


def test_aware_moment_is_shown_in_its_own_zone() -> None:
    moment = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=8)))
    assert format_memory_time(moment, with_time=True) == "2023-05-08 Mon 23:30"


@pytest.mark.parametrize(
    ("start", "end", "language", "expected"),
    [
        (datetime(2023, 5, 8), datetime(2023, 5, 9), "en", "2023-05-08 Mon"),
        (datetime(2023, 5, 8), datetime(2023, 5, 9), "zh", "2023年5月8日 周一"),
        (datetime(2023, 5, 1), datetime(2023, 5, 8), "en", "2023-05-01 Mon – 2023-05-07 Sun"),
        (datetime(2023, 5, 1), datetime(2023, 5, 8), "zh", "2023年5月1日 – 5月7日"),
        (datetime(2023, 5, 1), datetime(2023, 6, 1), "en", "2023-05-01 Mon – 2023-05-31 Wed"),
        (datetime(2023, 12, 25), datetime(2024, 1, 3), "zh", "2023年12月25日 – 2024年1月2日"),
        (datetime(2023, 5, 8, 12), datetime(2023, 5, 8, 18), "en", "2023-05-08 Mon 12:00–18:00"),
        (datetime(2023, 5, 8, 18), datetime(2023, 5, 9), "zh", "2023年5月8日 周一 18:00–24:00"),
        (datetime(2023, 5, 8, 18), datetime(2023, 5, 9, 6), "en", "2023-05-08 Mon 18:00 – 2023-05-09 Tue 06:00"),
        (datetime(2023, 5, 8, 18), datetime(2023, 5, 9, 6), "zh", "2023年5月8日 周一 18:00 – 5月9日 周二 06:00"),
        (datetime(2023, 5, 8), None, "en", "2023-05-08 Mon"),
        (datetime(2023, 5, 8, 14, 30), None, "zh", "2023年5月8日 周一 14:30"),
        (datetime(2023, 5, 8), datetime(2023, 5, 8), "en", "2023-05-08 Mon"),
    ],
)
def test_format_time_span(start: datetime, end: datetime | None, language: str, expected: str) -> None:
    assert format_time_span(start, end, language) == expected


def test_span_end_is_converted_to_start_zone() -> None:
    plus8 = timezone(timedelta(hours=8))
    start = datetime(2023, 5, 8, tzinfo=plus8)
    end = datetime(2023, 5, 8, 16, tzinfo=timezone.utc)  # 2023-05-09 00:00 at +08:00
    assert format_time_span(start, end) == "2023-05-08 Mon"


def test_parser_ranges_read_well() -> None:
    from memoryscope_plugins.timeparse.parser import parse_time

    parsed = parse_time("上周", datetime(2026, 11, 22, 15))
    assert parsed.range is not None and parsed.range.start is not None
    assert format_time_span(parsed.range.start, parsed.range.end, "zh") == "2026年11月9日 – 11月15日"
    parsed = parse_time("last night", datetime(2026, 11, 22, 15))
    assert parsed.range is not None and parsed.range.start is not None
    assert format_time_span(parsed.range.start, parsed.range.end) == "2026-11-21 Sat 18:00 – 2026-11-22 Sun 06:00"


@pytest.mark.parametrize("bad", [None, "2023-05-08", 1683504000])
def test_moment_must_be_datetime(bad: object) -> None:
    with pytest.raises(TypeError, match="moment must be a datetime"):
        format_memory_time(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="start must be a datetime"):
        format_time_span(bad, None)  # type: ignore[arg-type]


def test_span_end_must_be_datetime_or_none() -> None:
    with pytest.raises(TypeError, match="end must be a datetime"):
        format_time_span(MOMENT, "tomorrow")  # type: ignore[arg-type]


def test_language_must_be_str() -> None:
    with pytest.raises(TypeError, match="language"):
        format_memory_time(MOMENT, None)  # type: ignore[arg-type]
