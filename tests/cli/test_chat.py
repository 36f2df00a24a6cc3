"""The terminal chat: slash commands, no-model mode, and driving it through a pipe."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.cli.chat import run_chat
from tests.support.consolidation_helpers import at, make_engine, make_settings, user_msg
from tests.support.paths import ROOT


def chat(memory, script: str, user: str = "anna") -> str:
    out = io.StringIO()
    assert run_chat(memory, user, "assistant", stdin=io.StringIO(script), stdout=out) == 0
    return out.getvalue()


@pytest.fixture
def brain(brain):
    brain.reply = lambda prompt: ("You are vegetarian, so: lentil soup."
                                  if "vegetarian" in prompt.messages[0]["content"] else "Hello!")
    return brain


@pytest.fixture
def engine(tmp_path, server, brain, local_embedder):
    memory = make_engine(tmp_path, server, local_embedder)
    yield memory
    memory.close()


@pytest.fixture
def offline(tmp_path, local_embedder):
    memory = MemoryScope(make_settings(tmp_path), embedder=local_embedder)
    yield memory
    memory.close()


def test_without_a_model_it_records_and_shows_what_memory_recalls(offline):
    offline.record("anna", [user_msg("I'm vegetarian.", at(1))])
    out = chat(offline, "What should I cook tonight as a vegetarian?\n/consolidate\n")
    assert "replies need a model" in out
    assert "(recorded; no reply without a model)" in out
    assert "Anna: I'm vegetarian." in out  # what memory recalls for the message
    assert "consolidation needs a model" in out
    assert [m.content for m in offline.list("anna", newest_first=False)][-1] == \
        "What should I cook tonight as a vegetarian?"
    assert out.rstrip().endswith("bye")


def test_reply_is_streamed_and_the_turn_kept_in_short_term_history(engine, brain):
    engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
    out = chat(engine, "What should I cook tonight?\nAnd tomorrow?\n")
    assert "assistant> You are vegetarian, so: lentil soup." in out
    second = brain.prompts[-1].messages
    assert [m["content"] for m in second[1:3]] == ["What should I cook tonight?",
                                                    "You are vegetarian, so: lentil soup."]
    contents = [m.content for m in engine.list("anna", types=["turn"])]
    assert "You are vegetarian, so: lentil soup." in contents and "And tomorrow?" in contents


def test_slash_commands(engine, brain, tmp_path):
    out = chat(engine, "/help\nI'm vegetarian.\n/consolidate\n/reflect\n/add Anna likes green tea\n"
                       "/retrieve green tea\n/list 5\n/bogus\n/retrieve\n")
    assert "/delete_all" in out and "/export FILE" in out  # help
    assert "new observation: anna is vegetarian." in out
    assert "insight: " in out  # /reflect
    assert "added " in out and "Anna likes green tea" in out
    assert "unknown command /bogus" in out and "usage: /retrieve QUERY" in out
    added = next(m for m in engine.list("anna") if m.content == "Anna likes green tea")
    out = chat(engine, f"/delete {added.id}\n/delete nope\n/export {tmp_path / 'anna.jsonl'}\n")
    assert f"deleted {added.id}" in out and "error: user 'anna' has no memory 'nope'" in out
    items = [json.loads(line) for line in (tmp_path / "anna.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [item for item in items if "record" not in item]  # the memories; the ledger and profile follow
    assert lines and all(item["user_id"] == "anna" for item in lines)
    assert f"exported {len(lines)} {'memory' if len(lines) == 1 else 'memories'} to" in out
    # "Anna is vegetarian." states the diet: the profile holds it, and the export carries it
    assert [(i["key"], i["value"]) for i in items if i.get("record") == "profile"] == [("diet", "vegetarian")]


def test_delete_all_asks_first(engine):
    engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
    out = chat(engine, "/delete_all\nno\n")
    assert "Type the user id to confirm" in out and "cancelled" in out and engine.count("anna") == 1
    out = chat(engine, "/delete_all\nanna\n")
    assert "deleted 1 memory\n" in out and engine.count("anna") == 0


def test_clear_and_exit(engine, brain):
    out = chat(engine, "Hello there\n/clear\nAgain\n/exit\nnever read\n")
    assert "short-term history cleared (memories are kept)" in out
    assert [m["role"] for m in brain.prompts[-1].messages] == ["system", "user"]  # history was cleared
    assert "never read" not in [m.content for m in engine.list("anna")]
    assert engine.count("anna") == 4  # two turns of two messages each


def test_the_chat_command_reads_a_pipe(tmp_path, server, brain):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYSCOPE_")}
    env.update({"MEMORYSCOPE_HOME": str(tmp_path / "home"), "MEMORYSCOPE_LLM__PROVIDER": "openai",
                "MEMORYSCOPE_LLM__MODEL": "fake", "MEMORYSCOPE_LLM__BASE_URL": server.url + "/v1",
                "MEMORYSCOPE_LLM__API_KEY": "sk-test-0123456789", "MEMORYSCOPE_CONSOLIDATION__WORKER": "none"})
    store = tmp_path / "memory.db"
    done = subprocess.run([sys.executable, "-m", "memoryscope_plugins", "--store", str(store), "chat", "--user",
                           "anna"], input="I'm vegetarian.\n/consolidate\n/list\n/exit\n", capture_output=True,
                          text=True, env=env, timeout=120, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    assert "assistant> " in done.stdout and "new observation: anna is vegetarian." in done.stdout
    assert "observation: anna is vegetarian." in done.stdout.split("new observation")[-1]  # /list shows it
