"""Time expressions in English and Chinese, read without an LLM.

What the rest of the engine uses: `parse_time` (the range a query or a text names, relative to a
moment), `detect_language`, `mentioned_range` (the time a recorded message talks about),
`time_mentions` / `resolved_times` (relative times written out as dates for the context), and the
readable dates of `format_memory_time`, `format_time_span` and the listing labels. The rules live
in rules_en.py, rules_zh.py and rules_common.py, the calendar conventions in calendar_math.py and
docs/time_parser.md.
"""

from .context_times import MENTIONS_KEY, resolved_times, time_mentions, with_resolved_times
from .formatting import format_memory_time, format_time_span
from .labels import listing_line, when_label
from .mentioned_time import is_recurring, mentioned_range
from .parser import ParsedTime, detect_language, parse_time, parse_time_json

__all__ = [
    "MENTIONS_KEY",
    "ParsedTime",
    "detect_language",
    "format_memory_time",
    "format_time_span",
    "is_recurring",
    "listing_line",
    "mentioned_range",
    "parse_time",
    "parse_time_json",
    "resolved_times",
    "time_mentions",
    "when_label",
    "with_resolved_times",
]
