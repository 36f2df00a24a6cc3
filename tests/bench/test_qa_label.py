"""`bench qa-label` on wrong input: an ``error:`` line naming the bad entry and exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryscope_plugins.bench.qa_label import label_sample
from memoryscope_plugins.cli.main import main


def row(number: int, **answers: Any) -> dict[str, Any]:
    return {"id": f"q{number}", "category": 1, "question": "where?", "gold": "Lisbon", "now": None,
            "answers": answers}


REPORT = {"questions": [row(1, vector={"text": "Lisbon", "j": 1, "judged_by": "llm"}),
                        row(2, vector={"text": "Porto", "j": 0, "judged_by": "exact"},
                            none={"text": None, "j": None})]}


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def qa_label(capsys, report: Path, out: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["bench", "qa-label", "--in", str(report), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_labels_are_written_then_measured(tmp_path, capsys):
    report, labels = write(tmp_path / "qa.json", REPORT), tmp_path / "labels.json"
    assert qa_label(capsys, report, labels)[0] == 0
    items = json.loads(labels.read_text(encoding="utf-8"))
    assert [item["judged_by"] for item in items] == ["llm", "exact"]
    items[0]["label"] = 1
    del items[1]["label"]  # an item without a label is unlabelled, as before
    write(labels, items)
    code, out, _err = qa_label(capsys, report, labels)
    assert code == 0 and "judge agreement: 1/1 (100%), 1 still unlabelled" in out


def test_an_out_that_is_a_folder_is_an_error(tmp_path, capsys):
    report, folder = write(tmp_path / "qa.json", REPORT), tmp_path / "labels"
    folder.mkdir()
    code, _out, err = qa_label(capsys, report, folder)
    assert code == 2 and err == f"error: cannot read {folder}: Is a directory\n"


def test_an_out_that_cannot_be_written_is_an_error(tmp_path, capsys):
    report = write(tmp_path / "qa.json", REPORT)
    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "a_file" / "labels.json"
    code, _out, err = qa_label(capsys, report, out)
    assert code == 2 and err.startswith(f"error: cannot write {out}: ")


@pytest.mark.parametrize(("items", "said"), [
    ([{"label": 1}], "item 1 has no judged_by, j"),
    ([{"judged_by": "llm", "j": 1, "label": 1}, {"j": 0, "label": 0}], "item 2 has no judged_by"),
    ([{"judged_by": "llm", "label": 1}], "item 1 has no j"),
    ([5], "item 1 is not an object"),
    ([{"judged_by": "llm", "j": "yes", "label": 1}], 'item 1: "j" must be 0 or 1'),
    ([{"judged_by": ["llm"], "j": 1, "label": 1}], 'item 1: "j" must be 0 or 1 and "judged_by" a string'),
    ([{"judged_by": "llm", "j": 1, "label": 2}], "item 1: label must be null, 0 or 1"),
    ({"items": []}, "a list of items"),
])
def test_a_labels_file_edited_out_of_shape_is_an_error_naming_the_item(tmp_path, capsys, items, said):
    report, labels = write(tmp_path / "qa.json", REPORT), write(tmp_path / "labels.json", items)
    code, _out, err = qa_label(capsys, report, labels)
    assert code == 2 and err.startswith(f"error: {labels}: ") and said in err, err


@pytest.mark.parametrize(("questions", "said"), [
    ([5], "question 1 is not an object"),
    ([row(1), {"answers": {}}], "question 2 has no id, category, question, gold"),
    ([{**row(1), "gold": None}, {k: v for k, v in row(2).items() if k != "gold"}], "question 2 has no gold"),
    (5, '"questions" is not a list'),
    ([{**row(1), "answers": ["Lisbon"]}], 'question 1 (q1): "answers" is not an object of answers'),
    ([row(1, vector="Lisbon")], 'question 1 (q1): "answers" is not an object of answers'),
    ([row(1, vector={"j": 1, "judged_by": "llm"})], "question 1 (q1), answer vector: a judged answer has"),
    ([row(1, vector={"text": "x", "j": 1, "judged_by": None})], "question 1 (q1), answer vector"),
])
def test_a_report_whose_questions_are_out_of_shape_is_an_error_naming_the_question(tmp_path, capsys, questions,
                                                                                    said):
    report, labels = write(tmp_path / "qa.json", {"questions": questions}), tmp_path / "labels.json"
    code, _out, err = qa_label(capsys, report, labels)
    assert code == 2 and err.startswith(f"error: {report}: ") and said in err, err
    assert not labels.exists()


def test_label_sample_spreads_over_the_deciding_paths():
    chosen = label_sample(REPORT, limit=5, seed=0)
    assert [(item["id"], item["judged_by"]) for item in chosen] == [("q1", "llm"), ("q2", "exact")]
