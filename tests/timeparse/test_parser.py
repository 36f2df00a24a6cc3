"""Table-driven tests for the rule-based time parser (English and Chinese).

The tables are the spec: each row is (text, expected start, expected end[, now]). Times are
"YYYY-MM-DD" (00:00) or "YYYY-MM-DD HH:MM"; None marks an open side. The default now is
2026-11-22 15:00, a Sunday: this week is Mon 16 - Sun 22 Nov, last week Mon 9 - Sun 15 Nov.

Run the benchmark: /work/venv/bin/python tests/timeparse/test_parser.py
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

# the repository root, for `python tests/timeparse/test_parser.py`
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memoryscope_plugins.timeparse.parser import (  # noqa: E402
    ParsedTime,
    detect_language,
    parse_time,
    parse_time_json,
)
from memoryscope_plugins.types import TimeRange  # noqa: E402

NOW = datetime(2026, 11, 22, 15, 0)  # Sunday
MONDAY = datetime(2026, 11, 16, 9, 0)  # Monday of the same week
MONTH_START = datetime(2026, 3, 1, 10, 0)  # Sunday, first day of a month
YEAR_START = datetime(2027, 1, 1, 8, 0)  # Friday, first day of a year
LEAP_DAY = datetime(2028, 2, 29, 12, 0)  # Tuesday, leap day

Case = tuple  # (text, start, end) or (text, start, end, now)

EN_CASES: list[Case] = [
    # relative days
    ("what did I eat yesterday?", "2026-11-21", "2026-11-22"),
    ("today", "2026-11-22", "2026-11-23"),
    ("what did I do today", "2026-11-22", "2026-11-23"),
    ("tomorrow", "2026-11-23", "2026-11-24"),
    ("the day before yesterday", "2026-11-20", "2026-11-21"),
    ("what happened the day before yesterday?", "2026-11-20", "2026-11-21"),
    ("day after tomorrow", "2026-11-24", "2026-11-25"),
    ("3 days ago", "2026-11-19", "2026-11-20"),
    ("three days ago I met Anna", "2026-11-19", "2026-11-20"),
    ("a day ago", "2026-11-21", "2026-11-22"),
    ("two days ago", "2026-11-20", "2026-11-21"),
    ("ten days ago", "2026-11-12", "2026-11-13"),
    ("a few days ago", "2026-11-15", "2026-11-22"),  # why: "a few days ago" = any of the 7 days before today
    ("in 3 days", "2026-11-25", "2026-11-26"),
    ("two days from now", "2026-11-24", "2026-11-25"),
    ("What did I buy Yesterday?", "2026-11-21", "2026-11-22"),
    ("TODAY", "2026-11-22", "2026-11-23"),
    ("how was yesterday's meeting", "2026-11-21", "2026-11-22"),
    ("2 hours ago", "2026-11-22 13:00", "2026-11-22 14:00"),
    ("twenty-one days ago", "2026-11-01", "2026-11-02"),
    # parts of a day
    ("this morning", "2026-11-22 05:00", "2026-11-22 12:00"),
    ("what did I do this afternoon?", "2026-11-22 12:00", "2026-11-22 18:00"),
    ("this evening", "2026-11-22 18:00", "2026-11-23"),
    ("tonight", "2026-11-22 18:00", "2026-11-23 06:00"),
    ("what did I eat last night?", "2026-11-21 18:00", "2026-11-22 06:00"),
    ("yesterday afternoon", "2026-11-21 12:00", "2026-11-21 18:00"),
    ("yesterday morning", "2026-11-21 05:00", "2026-11-21 12:00"),
    ("yesterday evening", "2026-11-21 18:00", "2026-11-22"),
    ("tomorrow night", "2026-11-23 18:00", "2026-11-24 06:00"),
    ("last Friday night", "2026-11-20 18:00", "2026-11-21 06:00"),
    ("on Saturday afternoon", "2026-11-21 12:00", "2026-11-21 18:00"),
    ("yesterday at noon", "2026-11-21 11:00", "2026-11-21 14:00"),
    ("earlier today", "2026-11-22", "2026-11-22 15:00"),
    ("the morning of May 8", "2026-05-08 05:00", "2026-05-08 12:00"),
    ("Monday morning", "2026-11-16 05:00", "2026-11-16 12:00"),
    # weekdays (now is Sunday)
    ("last Friday", "2026-11-20", "2026-11-21"),  # why: the latest Friday strictly before today
    ("what did I do last Friday?", "2026-11-20", "2026-11-21"),
    ("this Friday", "2026-11-20", "2026-11-21"),  # the Friday of the current Monday-Sunday week
    ("what did I eat on Friday", "2026-11-20", "2026-11-21"),
    ("Friday", "2026-11-20", "2026-11-21"),
    ("next Monday", "2026-11-23", "2026-11-24"),  # why: next = the weekday of next calendar week
    ("last Sunday", "2026-11-15", "2026-11-16"),
    ("on Sunday", "2026-11-22", "2026-11-23"),  # bare weekday = latest one on or before today
    ("this Wednesday", "2026-11-18", "2026-11-19"),
    ("next Friday", "2026-11-27", "2026-11-28"),
    ("last Monday", "2026-11-16", "2026-11-17"),
    ("I saw her Tuesday", "2026-11-17", "2026-11-18"),
    ("the Friday before last", "2026-11-13", "2026-11-14"),
    ("Friday last week", "2026-11-13", "2026-11-14"),
    ("last week's Friday", "2026-11-13", "2026-11-14"),
    ("Wednesday of next week", "2026-11-25", "2026-11-26"),
    ("this coming Monday", "2026-11-23", "2026-11-24"),
    ("this past Saturday", "2026-11-21", "2026-11-22"),
    ("where did I go on Thursday?", "2026-11-19", "2026-11-20"),
    ("on Monday", "2026-11-16", "2026-11-17", MONDAY),
    ("last Monday", "2026-11-09", "2026-11-10", MONDAY),
    ("this Friday", "2026-11-20", "2026-11-21", MONDAY),
    ("next Friday", "2026-11-27", "2026-11-28", MONDAY),
    ("last Friday", "2026-11-13", "2026-11-14", MONDAY),
    ("on Friday", "2026-11-13", "2026-11-14", MONDAY),
    ("this coming Friday", "2026-11-20", "2026-11-21", MONDAY),
    # weeks
    ("last week", "2026-11-09", "2026-11-16"),
    ("what did I do last week?", "2026-11-09", "2026-11-16"),
    ("this week", "2026-11-16", "2026-11-23"),
    ("next week", "2026-11-23", "2026-11-30"),
    ("the week before last", "2026-11-02", "2026-11-09"),
    ("two weeks ago", "2026-11-02", "2026-11-09"),
    ("a week ago", "2026-11-09", "2026-11-16"),  # why: "N weeks ago" = the calendar week holding today - N weeks
    ("3 weeks ago", "2026-10-26", "2026-11-02"),
    ("the week after next", "2026-11-30", "2026-12-07"),
    ("earlier this week", "2026-11-16", "2026-11-22 15:00"),
    ("last week", "2026-11-09", "2026-11-16", MONDAY),
    ("this week", "2026-11-16", "2026-11-23", MONDAY),
    # weekends
    ("last weekend", "2026-11-14", "2026-11-16"),  # why: the weekend of the previous calendar week
    ("this weekend", "2026-11-21", "2026-11-23"),
    ("the weekend before last", "2026-11-07", "2026-11-09"),
    ("what did we do over the weekend?", "2026-11-21", "2026-11-23"),
    ("next weekend", "2026-11-28", "2026-11-30"),
    ("over the weekend", "2026-11-14", "2026-11-16", MONDAY),
    ("this weekend", "2026-11-21", "2026-11-23", MONDAY),
    ("last weekend", "2026-11-14", "2026-11-16", MONDAY),
    # months
    ("last month", "2026-10-01", "2026-11-01"),
    ("this month", "2026-11-01", "2026-12-01"),
    ("next month", "2026-12-01", "2027-01-01"),
    ("3 months ago", "2026-08-01", "2026-09-01"),
    ("the month before last", "2026-09-01", "2026-10-01"),
    ("a month ago", "2026-10-01", "2026-11-01"),
    ("two months ago", "2026-09-01", "2026-10-01"),
    ("earlier this month", "2026-11-01", "2026-11-22 15:00"),
    ("what did I read last month?", "2026-10-01", "2026-11-01"),
    ("last month", "2026-12-01", "2027-01-01", YEAR_START),
    ("this month", "2027-01-01", "2027-02-01", YEAR_START),
    ("last month", "2026-02-01", "2026-03-01", MONTH_START),
    # month names
    ("in May", "2026-05-01", "2026-06-01"),  # why: a bare month = the latest one that has begun
    ("what did I do in December?", "2025-12-01", "2026-01-01"),
    ("in November", "2026-11-01", "2026-12-01"),
    ("last May", "2026-05-01", "2026-06-01"),  # last = the latest one that is over
    ("next May", "2027-05-01", "2027-06-01"),
    ("this May", "2026-05-01", "2026-06-01"),
    ("last November", "2025-11-01", "2025-12-01"),
    ("May 2023", "2023-05-01", "2023-06-01"),
    ("in March 2021", "2021-03-01", "2021-04-01"),
    ("January was cold", "2026-01-01", "2026-02-01"),
    ("early June", "2026-06-01", "2026-06-11"),
    ("late October 2025", "2025-10-21", "2025-11-01"),
    ("mid-July", "2026-07-11", "2026-07-21"),
    ("in Sept", "2026-09-01", "2026-10-01"),
    ("since March", "2026-03-01", None),
    ("before June 2020", None, "2020-06-01"),
    ("after May", "2026-06-01", None),
    ("from March to May", "2026-03-01", "2026-06-01"),
    ("between June and August", "2026-06-01", "2026-09-01"),
    ("December last year", "2025-12-01", "2026-01-01"),
    ("in March", "2026-03-01", "2026-04-01", MONTH_START),
    ("last March", "2025-03-01", "2025-04-01", MONTH_START),
    # absolute dates
    ("May 8, 2023", "2023-05-08", "2023-05-09"),
    ("8 May", "2026-05-08", "2026-05-09"),
    ("8th of May 2023", "2023-05-08", "2023-05-09"),
    ("2023-05-08", "2023-05-08", "2023-05-09"),
    ("05/08/2023", "2023-05-08", "2023-05-09"),  # why: slashes are month first (US)
    ("on 13/05/2023", "2023-05-13", "2023-05-14"),
    ("what did I do on May 8th?", "2026-05-08", "2026-05-09"),
    ("December 25", "2025-12-25", "2025-12-26"),  # no year = the latest such date not in the future
    ("on the 8th", "2026-11-08", "2026-11-09"),
    ("the 3rd of last month", "2026-10-03", "2026-10-04"),
    ("on 5/8", "2026-05-08", "2026-05-09"),
    ("Feb 29", "2024-02-29", "2024-03-01"),
    ("08.05.2023", "2023-05-08", "2023-05-09"),  # dotted dates are day first
    ("2023/5/8", "2023-05-08", "2023-05-09"),
    ("March 3rd 2022", "2022-03-03", "2022-03-04"),
    ("Jan. 15, 2024", "2024-01-15", "2024-01-16"),
    ("the 1st of January 2020", "2020-01-01", "2020-01-02"),
    ("what happened on June 1st, 2024?", "2024-06-01", "2024-06-02"),
    ("Feb 29", "2028-02-29", "2028-03-01", LEAP_DAY),
    # years
    ("in 2022", "2022-01-01", "2023-01-01"),
    ("last year", "2025-01-01", "2026-01-01"),
    ("this year", "2026-01-01", "2027-01-01"),
    ("next year", "2027-01-01", "2028-01-01"),
    ("the year before last", "2024-01-01", "2025-01-01"),
    ("two years ago", "2024-01-01", "2025-01-01"),
    ("a year ago", "2025-01-01", "2026-01-01"),
    ("since 2020", "2020-01-01", None),
    ("before 2019", None, "2019-01-01"),
    ("early 2023", "2023-01-01", "2023-05-01"),
    ("in the 90s", "1990-01-01", "2000-01-01"),
    ("the 2010s", "2010-01-01", "2020-01-01"),
    ("earlier this year", "2026-01-01", "2026-11-22 15:00"),
    ("during 2019", "2019-01-01", "2020-01-01"),
    ("the year 2015", "2015-01-01", "2016-01-01"),
    ("where did I travel last year?", "2025-01-01", "2026-01-01"),
    ("last year", "2026-01-01", "2027-01-01", YEAR_START),
    ("a year ago", "2027-01-01", "2028-01-01", LEAP_DAY),
    # seasons (meteorological: spring Mar-May, summer Jun-Aug, autumn Sep-Nov, winter Dec-Feb)
    ("in the summer", "2026-06-01", "2026-09-01"),
    ("last summer", "2026-06-01", "2026-09-01"),  # why: last = the latest summer that is over
    ("this spring", "2026-03-01", "2026-06-01"),
    ("last winter", "2025-12-01", "2026-03-01"),
    ("this winter", "2026-12-01", "2027-03-01"),
    ("in the fall", "2026-09-01", "2026-12-01"),
    ("last fall", "2025-09-01", "2025-12-01"),
    ("summer 2023", "2023-06-01", "2023-09-01"),
    ("the summer of 2019", "2019-06-01", "2019-09-01"),
    ("next spring", "2027-03-01", "2027-06-01"),
    ("winter 2023", "2023-12-01", "2024-03-01"),
    ("in winter", "2025-12-01", "2026-03-01"),
    ("summer last year", "2025-06-01", "2025-09-01"),
    ("this winter", "2026-12-01", "2027-03-01", YEAR_START),
    ("last winter", "2025-12-01", "2026-03-01", YEAR_START),
    # festivals
    ("what did I get for Christmas?", "2025-12-25", "2025-12-26"),
    ("last Christmas", "2025-12-25", "2025-12-26"),
    ("this Christmas", "2026-12-25", "2026-12-26"),
    ("Christmas Eve", "2025-12-24", "2025-12-25"),
    ("New Year's Eve", "2025-12-31", "2026-01-01"),
    ("New Year's Day", "2026-01-01", "2026-01-02"),
    ("Halloween", "2026-10-31", "2026-11-01"),
    ("Thanksgiving", "2025-11-27", "2025-11-28"),
    ("Valentine's Day", "2026-02-14", "2026-02-15"),
    ("Easter", "2026-04-05", "2026-04-06"),
    ("Chinese New Year", "2026-02-17", "2026-02-24"),
    ("Christmas 2023", "2023-12-25", "2023-12-26"),
    ("the Mid-Autumn Festival", "2026-09-25", "2026-09-26"),
    ("next Christmas", "2026-12-25", "2026-12-26"),
    ("last Halloween", "2026-10-31", "2026-11-01"),
    # durations (rolling windows up to the end of today)
    ("in the past two weeks", "2026-11-08", "2026-11-23"),
    ("over the last 3 days", "2026-11-19", "2026-11-23"),
    ("the past week", "2026-11-15", "2026-11-23"),
    ("the last few days", "2026-11-19", "2026-11-23"),
    ("past 24 hours", "2026-11-21 15:00", "2026-11-22 15:00"),
    ("the past month", "2026-10-22", "2026-11-23"),
    ("in the past year", "2025-11-22", "2026-11-23"),
    ("the last couple of weeks", "2026-11-08", "2026-11-23"),
    ("the next 3 days", "2026-11-22", "2026-11-26"),
    ("in recent weeks", "2026-11-01", "2026-11-23"),
    ("during the last two months", "2026-09-22", "2026-11-23"),
    ("last 7 days", "2026-11-15", "2026-11-23"),
    ("this past week", "2026-11-15", "2026-11-23"),
    ("what have I been reading over the past few weeks?", "2026-11-01", "2026-11-23"),
    ("in the past year", "2027-02-28", "2028-03-01", LEAP_DAY),
    # counted from another expression, edges of months and years
    ("Melanie ran a charity race the Sunday before 25 May 2023", "2023-05-21", "2023-05-22"),
    ("the week before 9 June 2023", "2023-05-29", "2023-06-05"),
    ("two weekends before 17 July 2023", "2023-07-08", "2023-07-10"),
    ("the day after Christmas 2023", "2023-12-26", "2023-12-27"),
    ("the Friday after 1 May 2023", "2023-05-05", "2023-05-06"),
    ("early last year", "2025-01-01", "2025-05-01"),
    ("at the end of last month", "2026-10-21", "2026-11-01"),
    ("the beginning of 2020", "2020-01-01", "2020-05-01"),
    ("in 2019 and 2020", "2019-01-01", "2021-01-01"),
    ("What did we talk about on Sat?", "2026-11-21", "2026-11-22"),
    ("last Thurs", "2026-11-19", "2026-11-20"),
    ("May 8-10, 2023", "2023-05-08", "2023-05-11"),
    ("June 3 to 5", "2026-06-03", "2026-06-06"),
    ("the previous month", "2026-10-01", "2026-11-01"),
    ("the next 2 weeks", "2026-11-22", "2026-12-07"),
    # mixed and several expressions
    ("上周五 I met Anna", "2026-11-13", "2026-11-14"),
    ("what did I do 昨天", "2026-11-21", "2026-11-22"),
    ("from last Monday to yesterday", "2026-11-16", "2026-11-22"),
    ("yesterday", "2026-12-31", "2027-01-01", YEAR_START),
    ("tomorrow", "2028-03-01", "2028-03-02", LEAP_DAY),
]

ZH_CASES: list[Case] = [
    # relative days
    ("昨天我吃了什么", "2026-11-21", "2026-11-22"),
    ("今天", "2026-11-22", "2026-11-23"),
    ("明天", "2026-11-23", "2026-11-24"),
    ("前天", "2026-11-20", "2026-11-21"),
    ("大前天", "2026-11-19", "2026-11-20"),
    ("后天", "2026-11-24", "2026-11-25"),
    ("大后天", "2026-11-25", "2026-11-26"),
    ("三天前", "2026-11-19", "2026-11-20"),
    ("3天前我去了医院", "2026-11-19", "2026-11-20"),
    ("两天前", "2026-11-20", "2026-11-21"),
    ("十天前", "2026-11-12", "2026-11-13"),
    ("几天前", "2026-11-15", "2026-11-22"),  # why: 几天前 = any of the 7 days before today
    ("前几天我见了小王", "2026-11-15", "2026-11-22"),
    ("三天后", "2026-11-25", "2026-11-26"),
    ("昨日", "2026-11-21", "2026-11-22"),
    ("今日", "2026-11-22", "2026-11-23"),
    ("一天前", "2026-11-21", "2026-11-22"),
    ("十二天前", "2026-11-10", "2026-11-11"),
    ("昨天", "2026-02-28", "2026-03-01", MONTH_START),
    ("三天前", "2026-02-26", "2026-02-27", MONTH_START),
    ("昨天", "2028-02-28", "2028-02-29", LEAP_DAY),
    ("明天", "2028-03-01", "2028-03-02", LEAP_DAY),
    # parts of a day
    ("今天早上我吃了什么", "2026-11-22 05:00", "2026-11-22 12:00"),
    ("昨晚", "2026-11-21 18:00", "2026-11-22"),  # why: 晚/晚上 = evening 18-24; 夜 = night 18-06
    ("昨天下午", "2026-11-21 12:00", "2026-11-21 18:00"),
    ("今晚", "2026-11-22 18:00", "2026-11-23"),
    ("今早", "2026-11-22 05:00", "2026-11-22 12:00"),
    ("昨天晚上", "2026-11-21 18:00", "2026-11-22"),
    ("前天中午", "2026-11-20 11:00", "2026-11-20 14:00"),
    ("明天上午", "2026-11-23 05:00", "2026-11-23 12:00"),
    ("昨夜", "2026-11-21 18:00", "2026-11-22 06:00"),
    ("上周五晚上", "2026-11-13 18:00", "2026-11-14"),
    ("5月8日下午", "2026-05-08 12:00", "2026-05-08 18:00"),
    ("昨天凌晨", "2026-11-21 00:00", "2026-11-21 06:00"),
    ("周六傍晚", "2026-11-21 17:00", "2026-11-21 20:00"),
    ("明早", "2026-11-23 05:00", "2026-11-23 12:00"),
    ("昨天晚上我们聊了什么", "2026-11-21 18:00", "2026-11-22"),
    # weekdays
    ("上周五", "2026-11-13", "2026-11-14"),  # why: 上周五 = Friday of the previous calendar week
    ("上周三我做了什么", "2026-11-11", "2026-11-12"),
    ("这周三", "2026-11-18", "2026-11-19"),
    ("周三", "2026-11-18", "2026-11-19"),  # bare weekday = latest one on or before today
    ("下周一", "2026-11-23", "2026-11-24"),
    ("星期五", "2026-11-20", "2026-11-21"),
    ("礼拜天", "2026-11-22", "2026-11-23"),
    ("上星期二", "2026-11-10", "2026-11-11"),
    ("本周四", "2026-11-19", "2026-11-20"),
    ("下个星期五", "2026-11-27", "2026-11-28"),
    ("上个礼拜一", "2026-11-09", "2026-11-10"),
    ("上上周五", "2026-11-06", "2026-11-07"),
    ("周日", "2026-11-22", "2026-11-23"),
    ("星期天我去了公园", "2026-11-22", "2026-11-23"),
    ("这个星期六", "2026-11-21", "2026-11-22"),
    ("下下周一", "2026-11-30", "2026-12-01"),
    ("周一", "2026-11-16", "2026-11-17"),
    ("周三", "2026-11-11", "2026-11-12", MONDAY),
    ("这周五", "2026-11-20", "2026-11-21", MONDAY),
    ("上周五", "2026-11-13", "2026-11-14", MONDAY),
    ("上周二", "2028-02-22", "2028-02-23", LEAP_DAY),
    # weeks
    ("上周", "2026-11-09", "2026-11-16"),
    ("上上周", "2026-11-02", "2026-11-09"),
    ("本周", "2026-11-16", "2026-11-23"),
    ("这周我做了什么", "2026-11-16", "2026-11-23"),
    ("下周", "2026-11-23", "2026-11-30"),
    ("上个星期", "2026-11-09", "2026-11-16"),
    ("两周前", "2026-11-02", "2026-11-09"),
    ("一周前", "2026-11-09", "2026-11-16"),
    ("三个星期前", "2026-10-26", "2026-11-02"),
    ("这个礼拜", "2026-11-16", "2026-11-23"),
    ("上个礼拜", "2026-11-09", "2026-11-16"),
    ("下个星期", "2026-11-23", "2026-11-30"),
    ("这一周", "2026-11-16", "2026-11-23"),
    ("上周", "2026-02-16", "2026-02-23", MONTH_START),
    ("上周", "2026-12-21", "2026-12-28", YEAR_START),
    # weekends
    ("上个周末", "2026-11-14", "2026-11-16"),
    ("这个周末", "2026-11-21", "2026-11-23"),
    ("周末", "2026-11-21", "2026-11-23"),  # bare = the latest weekend that has begun
    ("上周末", "2026-11-14", "2026-11-16"),
    ("下周末", "2026-11-28", "2026-11-30"),
    ("上上个周末", "2026-11-07", "2026-11-09"),
    ("周末", "2026-11-14", "2026-11-16", MONDAY),
    # months
    ("上个月", "2026-10-01", "2026-11-01"),
    ("上上个月", "2026-09-01", "2026-10-01"),
    ("这个月", "2026-11-01", "2026-12-01"),
    ("下个月", "2026-12-01", "2027-01-01"),
    ("本月", "2026-11-01", "2026-12-01"),
    ("三个月前", "2026-08-01", "2026-09-01"),
    ("两个月前", "2026-09-01", "2026-10-01"),
    ("一个月前", "2026-10-01", "2026-11-01"),
    ("上月", "2026-10-01", "2026-11-01"),
    ("上个月8号", "2026-10-08", "2026-10-09"),
    ("这个月5号", "2026-11-05", "2026-11-06"),
    ("上个月底", "2026-10-21", "2026-11-01"),
    ("下月初", "2026-12-01", "2026-12-11"),
    ("上个月我读了什么书", "2026-10-01", "2026-11-01"),
    ("上个月", "2026-02-01", "2026-03-01", MONTH_START),
    ("这个月", "2028-02-01", "2028-03-01", LEAP_DAY),
    ("一个月前", "2028-01-01", "2028-02-01", LEAP_DAY),
    # month names and dates
    ("五月", "2026-05-01", "2026-06-01"),  # bare month = the latest one that has begun
    ("5月", "2026-05-01", "2026-06-01"),
    ("去年5月", "2025-05-01", "2025-06-01"),
    ("今年三月", "2026-03-01", "2026-04-01"),
    ("十二月", "2025-12-01", "2026-01-01"),
    ("十一月", "2026-11-01", "2026-12-01"),
    ("2023年5月", "2023-05-01", "2023-06-01"),
    ("2023年5月8日", "2023-05-08", "2023-05-09"),
    ("5月8日", "2026-05-08", "2026-05-09"),
    ("五月八号", "2026-05-08", "2026-05-09"),
    ("5月8号我去了哪里", "2026-05-08", "2026-05-09"),
    ("12月25日", "2025-12-25", "2025-12-26"),
    ("去年5月8日", "2025-05-08", "2025-05-09"),
    ("二〇二三年五月八日", "2023-05-08", "2023-05-09"),
    ("8号", "2026-11-08", "2026-11-09"),
    ("25号", "2026-10-25", "2026-10-26"),
    ("十五号", "2026-11-15", "2026-11-16"),
    ("5月初", "2026-05-01", "2026-05-11"),
    ("去年12月底", "2025-12-21", "2026-01-01"),
    ("3月中旬", "2026-03-11", "2026-03-21"),
    ("2023年5月份", "2023-05-01", "2023-06-01"),
    ("二月二十九日", "2024-02-29", "2024-03-01"),
    ("2023.5.8", "2023-05-08", "2023-05-09"),
    ("2023-05-08那天我在哪", "2023-05-08", "2023-05-09"),
    ("2023/05/08", "2023-05-08", "2023-05-09"),
    ("十月一号", "2026-10-01", "2026-10-02"),
    ("2月29日", "2028-02-29", "2028-03-01", LEAP_DAY),
    ("三月", "2026-03-01", "2026-04-01", MONTH_START),
    # years
    ("去年", "2025-01-01", "2026-01-01"),
    ("前年", "2024-01-01", "2025-01-01"),
    ("今年", "2026-01-01", "2027-01-01"),
    ("明年", "2027-01-01", "2028-01-01"),
    ("大前年", "2023-01-01", "2024-01-01"),
    ("2022年", "2022-01-01", "2023-01-01"),
    ("二〇二二年", "2022-01-01", "2023-01-01"),
    ("三年前", "2023-01-01", "2024-01-01"),
    ("两年前", "2024-01-01", "2025-01-01"),
    ("去年年底", "2025-11-01", "2026-01-01"),  # why: 年底 = Nov-Dec, 年初 = Jan-Feb
    ("今年年初", "2026-01-01", "2026-03-01"),
    ("今年上半年", "2026-01-01", "2026-07-01"),
    ("下半年", "2026-07-01", "2027-01-01"),
    ("2020年以来", "2020-01-01", None),
    ("2019年之前", None, "2019-01-01"),
    ("去年以后", "2026-01-01", None),
    ("90年代", "1990-01-01", "2000-01-01"),
    ("自从去年", "2025-01-01", None),
    ("一年前", "2025-01-01", "2026-01-01"),
    ("去年我去了哪些地方", "2025-01-01", "2026-01-01"),
    ("去年", "2026-01-01", "2027-01-01", YEAR_START),
    # seasons
    ("去年夏天", "2025-06-01", "2025-09-01"),
    ("今年春天", "2026-03-01", "2026-06-01"),
    ("夏天", "2026-06-01", "2026-09-01"),
    ("去年冬天", "2025-12-01", "2026-03-01"),  # why: winter of year Y = Dec Y - Feb Y+1
    ("今年冬天", "2026-12-01", "2027-03-01"),
    ("2023年秋天", "2023-09-01", "2023-12-01"),
    ("这个夏天", "2026-06-01", "2026-09-01"),
    ("上个冬天", "2025-12-01", "2026-03-01"),
    ("冬天", "2025-12-01", "2026-03-01"),
    ("前年春季", "2024-03-01", "2024-06-01"),
    ("去年夏天我去了哪里旅游", "2025-06-01", "2025-09-01"),
    # festivals
    ("今年春节", "2026-02-17", "2026-02-24"),  # why: 春节 = 正月初一 to 初七
    ("去年国庆", "2025-10-01", "2025-10-08"),  # why: 国庆 = the Oct 1-7 holiday week
    ("元旦", "2026-01-01", "2026-01-02"),
    ("圣诞节", "2025-12-25", "2025-12-26"),
    ("去年春节", "2025-01-29", "2025-02-05"),
    ("中秋节", "2026-09-25", "2026-09-26"),
    ("今年中秋", "2026-09-25", "2026-09-26"),
    ("端午节", "2026-06-19", "2026-06-20"),
    ("除夕", "2026-02-16", "2026-02-17"),
    ("国庆节", "2026-10-01", "2026-10-08"),
    ("五一", "2026-05-01", "2026-05-06"),
    ("情人节", "2026-02-14", "2026-02-15"),
    ("2023年春节", "2023-01-22", "2023-01-29"),
    ("清明节", "2026-04-05", "2026-04-06"),
    ("去年圣诞节", "2025-12-25", "2025-12-26"),
    ("平安夜", "2025-12-24", "2025-12-25"),
    ("七夕", "2026-08-19", "2026-08-20"),
    ("双十一", "2026-11-11", "2026-11-12"),
    ("万圣节", "2026-10-31", "2026-11-01"),
    ("元宵节", "2026-03-03", "2026-03-04"),
    ("感恩节", "2025-11-27", "2025-11-28"),
    ("国庆期间我去了哪里", "2026-10-01", "2026-10-08"),
    ("今年春节", "2027-02-06", "2027-02-13", YEAR_START),
    ("春节", "2026-02-17", "2026-02-24", YEAR_START),
    # durations
    ("最近三天", "2026-11-19", "2026-11-23"),
    ("过去两周", "2026-11-08", "2026-11-23"),
    ("这几天", "2026-11-19", "2026-11-23"),
    ("近三天", "2026-11-19", "2026-11-23"),
    ("最近一周", "2026-11-15", "2026-11-23"),
    ("最近一个月", "2026-10-22", "2026-11-23"),
    ("过去一年", "2025-11-22", "2026-11-23"),
    ("这两天", "2026-11-20", "2026-11-23"),
    ("前两天", "2026-11-20", "2026-11-22"),
    ("过去的三个月", "2026-08-22", "2026-11-23"),
    ("最近24小时", "2026-11-21 15:00", "2026-11-22 15:00"),
    ("两个小时前", "2026-11-22 13:00", "2026-11-22 14:00"),
    ("最近三天我吃了什么", "2026-11-19", "2026-11-23"),
    ("过去一年", "2027-02-28", "2028-03-01", LEAP_DAY),
    # open ranges
    ("上周以来", "2026-11-09", None),
    ("从上个月开始", "2026-10-01", None),
    ("春节前", None, "2026-02-17"),
    ("国庆后", "2026-10-08", None),
    # several expressions, mixed text
    ("2023年1月1日到3日", "2023-01-01", "2023-01-04"),
    ("5月1日至5月5日", "2026-05-01", "2026-05-06"),
    ("24年12月", "2024-12-01", "2025-01-01"),
    ("98年12月", "1998-12-01", "1999-01-01"),  # why: two-digit years more than 10 years ahead are 19xx
    ("我这周一直在加班", "2026-11-16", "2026-11-23"),  # 这周 + 一直, not 这周一
    ("前些天", "2026-11-15", "2026-11-22"),
    ("周一下午", "2026-11-16 12:00", "2026-11-16 18:00"),
    ("我2023-05-08去了北京", "2023-05-08", "2023-05-09"),
    ("从5月到7月", "2026-05-01", "2026-08-01"),
    ("last week 我去了哪里", "2026-11-09", "2026-11-16"),
]

NO_TIME_TEXTS = [
    "what is my favourite food?",
    "who is Anna's brother?",
    "what does Caroline do for work",
    "may I ask what my dog's name is",
    "I paid 2000 dollars for the bike",
    "I want to march in the parade",
    "we drank spring water",
    "I fall asleep easily",
    "recently I have been reading a lot",
    "do you know my sister",
    "what are my hobbies",
    "which books did I like",
    "tell me about my trip to Paris",
    "where do I live",
    "what is my phone number? it ends in 42",
    "how many kids does Melanie have",
    "what did Caroline say about the adoption agency",
    "who did I meet at the conference",
    "what is the name of my cat",
    "I love the summer job I have",
    "我喜欢吃什么",
    "我的猫叫什么名字",
    "我住在哪里",
    "3号线怎么走",
    "每周一开会",
    "最近怎么样",
    "我的爱好是什么",
    "小王是谁",
    "我在哪家公司工作",
    "我养了几只猫",
    "我妹妹喜欢什么颜色",
    "我上次说的那本书叫什么",
    "帮我记一下密码",
    "我对什么过敏",
    "我最喜欢的电影是哪部",
    "一日三餐要规律",
    "我家在8号楼",
    "when I was young, what did I like?",
    "the next day I went home",
    "every Friday I play tennis",
    "the day I met her",
    "what did I do in the morning",  # why: a bare part of day is a habit as often as a time
    "我每个周末都去游泳",
    "这一天我永远不会忘记",
    "上午我一般在家",
    "我们一周一次去健身房",
]

ALL_CASES = [("en", case) for case in EN_CASES] + [("zh", case) for case in ZH_CASES]


def _moment(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value) if " " in value else datetime.fromisoformat(value + "T00:00")


def _expected(case: Case) -> tuple[TimeRange, datetime]:
    text, start, end, *rest = case
    return TimeRange(_moment(start), _moment(end)), rest[0] if rest else NOW


def _case_id(case: Case) -> str:
    now = case[3].strftime("@%Y-%m-%d") if len(case) > 3 else ""
    return f"{case[0]}{now}"


def _is_correct(case: Case) -> bool:
    expected, now = _expected(case)
    return parse_time(case[0], now).range == expected


# --- the table ---------------------------------------------------------------------------------


def test_table_sizes() -> None:
    assert len(EN_CASES) >= 150
    assert len(ZH_CASES) >= 150


@pytest.mark.parametrize("case", EN_CASES, ids=_case_id)
def test_english_table(case: Case) -> None:
    expected, now = _expected(case)
    assert parse_time(case[0], now).range == expected


@pytest.mark.parametrize("case", ZH_CASES, ids=_case_id)
def test_chinese_table(case: Case) -> None:
    expected, now = _expected(case)
    assert parse_time(case[0], now).range == expected


def test_accuracy_is_total_on_the_table() -> None:
    en_right = sum(_is_correct(case) for case in EN_CASES)
    zh_right = sum(_is_correct(case) for case in ZH_CASES)
    assert (en_right, zh_right) == (len(EN_CASES), len(ZH_CASES))


@pytest.mark.parametrize("text", NO_TIME_TEXTS)
def test_texts_without_time_give_no_range(text: str) -> None:
    parsed = parse_time(text, NOW)
    assert parsed.range is None
    assert parsed.expressions == ()


# --- other fields ------------------------------------------------------------------------------


def test_when_question_without_time() -> None:
    parsed = parse_time("when did I go to Paris", NOW)
    assert parsed.range is None
    assert parsed.asks_when is True
    assert "go to Paris" in parsed.remainder
    assert parsed.language == "en"


@pytest.mark.parametrize(
    "text",
    [
        "When did I go to Paris?",
        "what year did I move to Berlin",
        "which day did we meet",
        "how long ago did I start running",
        "when was my last dentist visit",
        "since when do I play the guitar",
        "我什么时候去的巴黎",
        "我们是哪天认识的",
        "上次体检是几号",
        "我哪一年搬到上海的",
        "多久以前开始跑步的",
        "啥时候买的车",
        "生日是星期几",
    ],
)
def test_asks_when(text: str) -> None:
    assert parse_time(text, NOW).asks_when is True


@pytest.mark.parametrize(
    "text",
    ["what did I eat yesterday", "When I was in Paris, what did I eat?", "我昨天吃了什么", "where is my key"],
)
def test_does_not_ask_when(text: str) -> None:
    assert parse_time(text, NOW).asks_when is False


@pytest.mark.parametrize(
    ("text", "expressions", "remainder"),
    [
        ("what did I eat yesterday?", ("yesterday",), "what did I eat?"),
        ("what did I do last Friday night?", ("last Friday night",), "what did I do?"),
        ("did I go running on Friday?", ("Friday",), "did I go running?"),
        ("what did we do over the weekend", ("the weekend",), "what did we do"),
        ("what have I read since May?", ("since May",), "what have I read?"),
        ("上周三我做了什么", ("上周三",), "我做了什么"),
        ("我在去年国庆去了哪里", ("去年国庆",), "我去了哪里"),
        ("上周的会议讲了什么", ("上周",), "会议讲了什么"),
        ("昨天下午，我和小王去了哪里？", ("昨天下午",), "我和小王去了哪里？"),
        ("from May to July I lived in Rome", ("May", "July"), "to I lived in Rome"),
        ("what did we talk about on Sat?", ("Sat",), "what did we talk about?"),
        ("我今年30岁", ("今年",), "我30岁"),
        ("春节期间我回老家了", ("春节",), "我回老家了"),
        ("我上周一起去吃饭的那家店叫什么", ("上周",), "我一起去吃饭的那家店叫什么"),
        ("Melanie ran a race the Sunday before 25 May 2023", ("the Sunday before 25 May 2023",), "Melanie ran a race"),
        ("I met Anna yesterday and Bob today", ("yesterday", "today"), "I met Anna and Bob"),
    ],
)
def test_expressions_and_remainder(text: str, expressions: tuple[str, ...], remainder: str) -> None:
    parsed = parse_time(text, NOW)
    assert parsed.expressions == expressions
    assert parsed.remainder == remainder


def test_union_of_several_expressions() -> None:
    parsed = parse_time("I met Anna yesterday and Bob last Monday", NOW)
    assert parsed.range == TimeRange(datetime(2026, 11, 16), datetime(2026, 11, 22))


def test_remainder_without_time_is_tidied_text() -> None:
    assert parse_time("  where   is my key ?  ", NOW).remainder == "where is my key?"


def test_parsed_time_is_frozen() -> None:
    parsed = parse_time("yesterday", NOW)
    assert isinstance(parsed, ParsedTime)
    with pytest.raises(AttributeError):
        parsed.remainder = "x"  # type: ignore[misc]


# --- language ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("what did I eat yesterday", "en"),
        ("我昨天吃了什么", "zh"),
        ("我昨天在 Paris 吃了什么", "zh"),
        ("what does 你好 mean in English", "en"),
        ("", "en"),
        ("2023-05-08", "en"),
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language
    assert parse_time(text, NOW).language == language


def test_language_override_only_changes_the_report() -> None:
    parsed = parse_time("昨天 I went hiking", NOW, language="en")
    assert parsed.language == "en"
    assert parsed.range == TimeRange(datetime(2026, 11, 21), datetime(2026, 11, 22))


def test_mixed_language_text() -> None:
    parsed = parse_time("last Friday 和上周三 我都做了什么", NOW)
    assert parsed.range == TimeRange(datetime(2026, 11, 11), datetime(2026, 11, 21))
    assert parsed.expressions == ("last Friday", "上周三")


def test_full_width_digits() -> None:
    parsed = parse_time("２０２３年５月８日", NOW)
    assert parsed.range == TimeRange(datetime(2023, 5, 8), datetime(2023, 5, 9))
    assert parsed.expressions == ("２０２３年５月８日",)


# --- time zones and input checks ---------------------------------------------------------------


def test_aware_now_keeps_its_timezone() -> None:
    shanghai = ZoneInfo("Asia/Shanghai")
    now = datetime(2026, 11, 22, 1, 30, tzinfo=shanghai)  # still Saturday 21 Nov in UTC
    parsed = parse_time("昨天", now)
    assert parsed.range == TimeRange(datetime(2026, 11, 21, tzinfo=shanghai), datetime(2026, 11, 22, tzinfo=shanghai))
    assert parsed.range.start.tzinfo is shanghai


def test_aware_utc_now() -> None:
    now = NOW.replace(tzinfo=timezone.utc)
    parsed = parse_time("last week", now)
    utc = timezone.utc
    assert parsed.range == TimeRange(datetime(2026, 11, 9, tzinfo=utc), datetime(2026, 11, 16, tzinfo=utc))


def test_naive_now_gives_naive_range() -> None:
    parsed = parse_time("yesterday", NOW)
    assert parsed.range.start.tzinfo is None and parsed.range.end.tzinfo is None


def test_hour_ranges_with_fixed_offset() -> None:
    zone = timezone(timedelta(hours=-5))
    parsed = parse_time("tonight", NOW.replace(tzinfo=zone))
    assert parsed.range == TimeRange(datetime(2026, 11, 22, 18, tzinfo=zone), datetime(2026, 11, 23, 6, tzinfo=zone))


@pytest.mark.parametrize("bad_text", [None, 42, b"yesterday", ["yesterday"]])
def test_text_must_be_str(bad_text: object) -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        parse_time(bad_text, NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_now", [None, "2026-11-22", 1700000000, NOW.date()])
def test_now_must_be_datetime(bad_now: object) -> None:
    with pytest.raises(TypeError, match="now must be a datetime"):
        parse_time("yesterday", bad_now)  # type: ignore[arg-type]


def test_language_must_be_known() -> None:
    with pytest.raises(ValueError, match="language"):
        parse_time("yesterday", NOW, language="fr")


def test_detect_language_type_error() -> None:
    with pytest.raises(TypeError):
        detect_language(None)  # type: ignore[arg-type]


# --- JSON --------------------------------------------------------------------------------------


def test_parse_time_json() -> None:
    assert parse_time_json("what did I eat yesterday?", NOW) == {
        "text": "what did I eat yesterday?",
        "start": "2026-11-21T00:00:00",
        "end": "2026-11-22T00:00:00",
    }
    assert parse_time_json("where is my key", NOW) == {"text": "where is my key", "start": None, "end": None}
    assert parse_time_json("since 2020", NOW)["end"] is None


def test_parse_time_json_aware() -> None:
    now = NOW.replace(tzinfo=timezone(timedelta(hours=8)))
    assert parse_time_json("昨天", now)["start"] == "2026-11-21T00:00:00+08:00"


# --- speed -------------------------------------------------------------------------------------


def measure(texts: list[tuple[str, datetime]], rounds: int = 3) -> tuple[float, float]:
    """(mean, p95) parse time in milliseconds, the best of `rounds` passes for the mean."""
    best: list[float] = []
    for _ in range(rounds):
        samples = []
        for text, now in texts:
            begin = time.perf_counter()
            parse_time(text, now)
            samples.append((time.perf_counter() - begin) * 1000)
        if not best or statistics.fmean(samples) < statistics.fmean(best):
            best = samples
    best.sort()
    return statistics.fmean(best), best[int(0.95 * (len(best) - 1))]


def _timing_inputs() -> tuple[list[tuple[str, datetime]], list[tuple[str, datetime]]]:
    table = [(case[0], _expected(case)[1]) for _, case in ALL_CASES]
    plain = [(text, NOW) for text in NO_TIME_TEXTS]
    return table, plain


if __name__ == "__main__":
    table_inputs, plain_inputs = _timing_inputs()
    for label, inputs in (("table", table_inputs), ("no-time", plain_inputs)):
        mean_ms, p95_ms = measure(inputs)
        print(f"{label}: {len(inputs)} texts, mean {mean_ms:.3f} ms, p95 {p95_ms:.3f} ms")
    en_ok = sum(_is_correct(case) for case in EN_CASES)
    zh_ok = sum(_is_correct(case) for case in ZH_CASES)
    print(f"accuracy: en {en_ok}/{len(EN_CASES)}, zh {zh_ok}/{len(ZH_CASES)}")
