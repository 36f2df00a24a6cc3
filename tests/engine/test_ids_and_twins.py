"""Issue 29 item 8: `add` with another user's memory id answers without revealing whose it is; `users`,
`legacy_users` and `rename_user` have async twins sharing the one implementation; a time past year 9999
ends in an unparsed result, not a traceback (library and `parse-time`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.timeparse import parse_time


def test_add_with_another_users_id_does_not_say_whose_it_is(engine):
    engine.add("bob", "Bob keeps bees.", memory_id="bee-note")
    with pytest.raises(ValidationError) as caught:
        engine.add("anna", "Anna keeps bees.", memory_id="bee-note")
    message = str(caught.value)
    assert "another user" not in message and "bob" not in message and "bee-note" not in message
    assert "memory_id" in message
    assert [m.content for m in engine.list("bob")] == ["Bob keeps bees."]
    assert engine.list("anna") == []
    engine.add("anna", "Anna keeps bees.", memory_id="anna-note")  # her own id: stored, then replaced
    assert engine.add("anna", "Anna keeps two hives.", memory_id="anna-note").content == "Anna keeps two hives."
    assert [m.content for m in engine.list("anna")] == ["Anna keeps two hives."]


def test_users_legacy_users_and_rename_user_have_async_twins(engine):
    engine.add("anna", "Anna keeps bees.")

    async def run():
        assert await engine.ausers() == engine.users() == ["anna"]
        assert await engine.alegacy_users() == engine.legacy_users() == []
        assert await engine.arename_user("anna", "anna-2") == 1
        assert await engine.ausers() == ["anna-2"]
    asyncio.run(run())
    for name in ("users", "legacy_users", "rename_user"):
        assert getattr(MemoryScope, "a" + name).__doc__ == f"Async twin of :meth:`{name}`."


def test_times_past_year_9999_are_left_unparsed():
    parsed = parse_time("in 3 years", datetime(9998, 6, 1, tzinfo=timezone.utc))
    assert parsed.range is None and parsed.expressions == () and parsed.remainder == "in 3 years"
    assert parse_time("in 3 years", datetime(2026, 6, 1)).range is not None


def test_parse_time_cli_past_year_9999_prints_no_traceback():
    done = subprocess.run([sys.executable, "-m", "memoryscope_plugins", "parse-time", "in 3 years",
                           "--now", "9998-06-01"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert '"start": null' in done.stdout
