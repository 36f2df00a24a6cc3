"""bench/locomo_cut.py: a LoCoMo file cut to its first sessions, with only the questions they answer."""

from __future__ import annotations

import json

import pytest

from tests.support.bench_scripts import load_bench_script
from tests.support.paths import ROOT

TINY = ROOT / "tests" / "data" / "qa_tiny_locomo.json"




lc = load_bench_script("locomo_cut.py", "locomo_cut_bench")


def test_the_first_session_and_the_questions_it_answers():
    data = json.loads(TINY.read_text(encoding="utf-8"))
    data[0]["event_summary"] = {"events_session_1": {}, "events_session_2": {}}
    [en] = lc.cut(data, ["tiny-en"], 1)
    assert list(en["event_summary"]) == ["events_session_1"]
    assert sorted(k for k in en["conversation"] if k.startswith("session_")) == ["session_1", "session_1_date_time"]
    assert list(en["observation"]) == ["session_1_observation"]
    kept = [q["evidence"] for q in en["qa"]]
    assert kept and all(e.startswith("D1:") for evidence in kept for e in evidence)
    assert ["D1:2", "D2:2"] not in kept  # one of its turns is in session 2
    assert len(kept) == sum(1 for q in data[0]["qa"] if all(e.startswith("D1:") for e in q["evidence"]))
    assert data[0]["conversation"].get("session_2")  # the input is untouched


def test_all_conversations_and_all_sessions_keep_everything_with_evidence():
    data = json.loads(TINY.read_text(encoding="utf-8"))
    assert lc.cut(data, None, 99) == data


def test_questions_without_evidence_or_with_unreadable_evidence_are_dropped():
    assert not lc.answerable({"question": "?"}, 5)
    assert not lc.answerable({"evidence": ["D1:3", "later"]}, 5)
    assert lc.answerable({"evidence": [" D2:7 "]}, 2) and not lc.answerable({"evidence": ["D3:1"]}, 2)


def test_wrong_arguments_are_refused(tmp_path):
    data = json.loads(TINY.read_text(encoding="utf-8"))
    with pytest.raises(ValueError):
        lc.cut(data, ["conv-404"], 2)
    with pytest.raises(ValueError):
        lc.cut(data, None, 0)
    with pytest.raises(SystemExit):
        lc.main([str(TINY), str(TINY), "--sessions", "1"])  # never writes over its input
    out = tmp_path / "cut.json"
    assert lc.main([str(TINY), str(out), "--conversations", "tiny-zh", "--sessions", "1"]) == 0
    assert [c["sample_id"] for c in json.loads(out.read_text(encoding="utf-8"))] == ["tiny-zh"]
