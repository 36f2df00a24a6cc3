"""How every backend writes a time: the exact ISO text (its UTC offset kept, so a memory reads back
as it was written) beside a comparable number for filters and ordering.

A naive datetime is taken as UTC (`types.as_aware`) before either encoding, so times written
without a zone still compare with every other.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..types import as_aware

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def iso(moment: datetime | None) -> str | None:
    """The ISO text kept verbatim in the record (None stays None)."""
    return None if moment is None else as_aware(moment).isoformat()


def parse_iso(text: str | None) -> datetime | None:
    """The datetime `iso` wrote, with its offset."""
    return None if text is None else datetime.fromisoformat(text)


def aware(moment: datetime | None) -> datetime | None:
    """The moment with a zone (UTC for a naive one), for engines with a time type of their own."""
    return None if moment is None else as_aware(moment)


def epoch_seconds(moment: datetime | None) -> float | None:
    """Seconds since the epoch as a float (SQLite's comparable column)."""
    return None if moment is None else as_aware(moment).timestamp()


def epoch_microseconds(moment: datetime | None) -> int | None:
    """Whole microseconds since the epoch (Elasticsearch's comparable field: exact, no rounding)."""
    if moment is None:
        return None
    return (as_aware(moment) - _EPOCH) // _MICROSECOND
