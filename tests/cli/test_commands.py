"""The command line: demo, parse-time, admin commands and the LoCoMo benchmark on a tiny fixture."""

from __future__ import annotations

import io
import json

import pytest

from memoryscope_plugins.cli.demo import run_demo
from memoryscope_plugins.cli.main import main


def test_demo_recalls_the_facts_offline(local_embedder, tmp_path):
    out = io.StringIO()
    recalled = run_demo(out)
    text = out.getvalue()
    assert "LLM: none" in text and "retrieved in" in text
    assert any("peanuts" in m for m in recalled["What should I cook for Anna tonight?"])
    assert any("Porto" in m for m in recalled["Where does Anna's sister live, and what's her news?"])
    assert any("马德里" in m for m in recalled["下周五我有什么安排？"])


def test_parse_time_prints_one_json_object(capsys):
    assert main(["parse-time", "what did I do last weekend?", "--now", "2026-11-22T15:00:00"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == {"text": "what did I do last weekend?", "start": "2026-11-14T00:00:00",
                      "end": "2026-11-16T00:00:00"}
    assert main(["parse-time", "hello there", "--now", "2026-11-22T15:00:00"]) == 0
    assert json.loads(capsys.readouterr().out)["start"] is None


def test_admin_commands(tmp_path, capsys):
    store = str(tmp_path / "cli.db")
    assert main(["--store", store, "add", "anna", "Anna keeps bees."]) == 0
    assert "Anna keeps bees." in capsys.readouterr().out
    assert main(["--store", store, "retrieve", "anna", "bees", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    memory_id = found["memories"][0]["id"]
    assert found["memories"][0]["content"] == "Anna keeps bees."
    assert main(["--store", store, "users"]) == 0
    assert capsys.readouterr().out.split() == ["anna"]
    export = tmp_path / "anna.jsonl"
    assert main(["--store", store, "export", "anna", str(export)]) == 0
    assert main(["--store", store, "import", "bob", str(export)]) == 0
    assert main(["--store", store, "list", "bob"]) == 0
    assert "Anna keeps bees." in capsys.readouterr().out
    assert main(["--store", store, "delete", "anna", memory_id]) == 0
    assert main(["--store", store, "delete", "anna", memory_id]) == 1  # a clear error, not a traceback
    assert "error: no user 'anna' in this store" in capsys.readouterr().err  # anna's one memory is gone
    assert main(["--store", store, "delete", "bob", "no-such-id"]) == 1
    assert "error: user 'bob' has no memory 'no-such-id'" in capsys.readouterr().err
    assert main(["--store", store, "delete-all", "bob"]) == 2  # refuses without --yes when not a terminal
    assert main(["--store", store, "delete-all", "bob", "--yes"]) == 0


def test_the_identifier_rule_and_legacy_users_on_the_command_line(tmp_path, capsys):
    from memoryscope_plugins.storage.sqlite_store import SQLiteStore
    from memoryscope_plugins.types import Memory
    store = str(tmp_path / "cli.db")
    for bad in ["a/b", "..", " ", "x\ny"]:
        assert main(["--store", store, "add", bad, "refused"]) == 1
        assert "user_id" in capsys.readouterr().err
    old = SQLiteStore(store)  # users written before the rule, as an older version could
    old.put([Memory(id="m1", user_id="acme/anna", agent_id="a", content="Anna keeps bees."),
             Memory(id="m2", user_id="x\ry", agent_id="a", content="odd")])
    old.close()
    assert main(["--store", store, "users", "--legacy"]) == 0
    assert capsys.readouterr().out.splitlines() == ["'acme/anna'", "'x\\ry'"]  # printed escaped
    assert main(["--store", store, "rename-user", "acme/anna", "anna"]) == 0
    assert "moved 1 memory to anna" in capsys.readouterr().out
    assert main(["--store", store, "rename-user", "x\ry", "anna"]) == 1  # never merges into a user with data
    assert main(["--store", store, "delete-all", "x\ry", "--yes"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "users"]) == 0
    assert capsys.readouterr().out.split() == ["anna"]


def _tiny_locomo(path):
    conversation = {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a LGBTQ support group yesterday."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's great! How was it?"},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Really inspiring, the stories moved me."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race for mental health.",
             "blip_caption": "a photo of runners"},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "Wow, proud of you!"},
        ],
    }
    data = [{
        "sample_id": "tiny-1", "conversation": conversation,
        "observation": {"session_1_observation": {"Caroline": [["Caroline went to a support group.", "D1:1"]]},
                        "session_2_observation": {"Melanie": [["Melanie ran a charity race.", "D2:1"]]}},
        "qa": [
            {"question": "When did Caroline go to the support group?", "answer": "7 May 2023",
             "evidence": ["D1:1"], "category": 2, "tags": ["time_word"]},
            {"question": "What race did Melanie run?", "answer": "charity race", "evidence": ["D2:1"], "category": 4,
             "tags": ["update", "paraphrase"], "stale_evidence": ["D1:3", "D7:7"]},
            {"question": "What did Melanie paint?", "evidence": ["D:9:99"], "category": 4},  # no valid evidence
        ],
    }]
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("mode", ["turns", "observations"])
def test_bench_locomo_on_a_tiny_file(tmp_path, capsys, mode):
    data = tmp_path / "tiny.json"
    _tiny_locomo(data)
    out = tmp_path / "report.json"
    assert main(["bench", "locomo", "--data", str(data), "--mode", mode, "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["mode"] == mode and report["n_queries"] == 2  # the question without evidence is skipped
    assert set(report["recall"]) == {"1-4", "1", "2", "3", "4", "5"}
    assert set(report["recall"]["1-4"]) == {"1", "3", "5", "10", "20"}
    assert report["recall"]["1-4"]["20"] == 1.0 and report["hit"]["1-4"]["20"] == 1.0
    assert report["recall"]["1"] is None  # no multi-hop question in the file
    assert {"p50", "p95"} <= set(report["search_ms"]) and report["ingest_ms_per_memory"] > 0
    assert "api_key" in json.dumps(report["config"])  # the config is reported, secrets masked
    tags = report["tags"]  # per-tag recall, each tag beside the questions without it
    assert {"time_word", "not time_word", "update", "not update", "paraphrase", "not paraphrase"} == set(tags)
    assert tags["update"]["n"] == 1 and tags["not update"]["n"] == 1
    assert tags["update"]["n_with_stale"] == 1  # D7:7 names no turn and is dropped
    assert tags["update"]["stale_outranks_rate"] in (0.0, 1.0)
    output = capsys.readouterr().out
    assert "| recall |" in output and "| tag (categories 1-4) |" in output


def test_bench_locomo_puts_plain_cosine_beside_the_engine(tmp_path, capsys):
    data = tmp_path / "tiny.json"
    _tiny_locomo(data)
    out = tmp_path / "report.json"
    assert main(["bench", "locomo", "--data", str(data), "--baseline", "cosine", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    cosine = report["baselines"]["cosine"]
    assert cosine["n_queries"] == report["n_queries"] == 2 and cosine["n_memories"] == report["n_memories"] == 5
    assert cosine["recall"]["1-4"]["20"] == 1.0  # five memories: every gold turn is in its 20
    assert set(cosine["hit"]["1-4"]) == {"1", "3", "5", "10", "20"} and cosine["search_ms"]["p50"] > 0
    output = capsys.readouterr().out
    assert "Baseline 'cosine' (plain cosine" in output and output.count("| recall |") == 2
    assert "retrieval p50 / the query embedding's p50:" in output


def test_bench_locomo_refuses_an_unknown_baseline(tmp_path):
    from memoryscope_plugins.bench.locomo import run_locomo
    data = tmp_path / "tiny.json"
    _tiny_locomo(data)
    with pytest.raises(ValueError, match="unknown baselines"):
        run_locomo(data, baselines=["bm25"])
    with pytest.raises(SystemExit):
        main(["bench", "locomo", "--data", str(data), "--baseline", "bm25"])
