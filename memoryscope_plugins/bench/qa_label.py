"""Hand labels for `bench qa`'s judge: pick answers to label, then measure agreement.

`bench qa-label --in qa.json --out labels.json` writes a sample of judged answers (spread over
the paths that decided them: each deterministic rule and the LLM) with ``"label": null``; a
person sets each label to 1 (correct) or 0 (wrong). Run the same command again and it reports
how often the judge agrees with the labels, overall and per path. Labels already given are
never overwritten.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from .qa import QAInputError, write_atomically

ROW_FIELDS = ("id", "category", "question", "gold")
LABEL_FIELDS = ("judged_by", "j")


def _require_fields(value: Any, fields: tuple[str, ...], where: str, hint: str = "") -> None:
    """`QAInputError` naming `where` unless `value` is an object holding every one of `fields`."""
    if not isinstance(value, dict):
        raise QAInputError(f"{where} is not an object")
    missing = [name for name in fields if name not in value]
    if missing:
        raise QAInputError(f"{where} has no {', '.join(missing)}{hint}")


def _judged(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The judged answers of a `bench qa` result; a `QAInputError` names the first question that is not one."""
    questions = report.get("questions")
    if not isinstance(questions, list):
        raise QAInputError('not a bench qa result: "questions" is not a list')
    items = []
    for number, row in enumerate(questions, 1):
        where = f"question {number}"
        _require_fields(row, ROW_FIELDS, where)
        answers = row.get("answers") or {}
        if not isinstance(answers, dict) or not all(isinstance(a, dict) for a in answers.values()):
            raise QAInputError(f'{where} ({row["id"]}): "answers" is not an object of answers')
        for config, answer in answers.items():
            if answer.get("j") is None:
                continue
            if answer["j"] not in (0, 1) or not isinstance(answer.get("judged_by", ""), str) \
                    or "text" not in answer:
                raise QAInputError(f'{where} ({row["id"]}), answer {config}: a judged answer has a "text", '
                                   '"j" 0 or 1 and a "judged_by" string')
            items.append({"id": row["id"], "config": config, "category": row["category"],
                          "question": row["question"], "gold": row["gold"], "answer": answer["text"],
                          "now": row.get("now"), "judged_by": answer.get("judged_by", ""), "j": answer["j"],
                          "label": None})
    return items


def _check_labels(labels: Any, path: Path) -> None:
    """A labels file is a list of objects with a "judged_by" string, "j" 0 or 1 and "label" null, 0 or 1."""
    if not isinstance(labels, list):
        raise QAInputError(f"{path}: a list of items whose label is null, 0 or 1")
    for number, item in enumerate(labels, 1):
        where = f"{path}: item {number}"
        _require_fields(item, LABEL_FIELDS, where, " (keep the fields qa-label wrote)")
        if item.get("label") not in (None, 0, 1):
            raise QAInputError(f"{where}: label must be null, 0 or 1")
        if item["j"] not in (0, 1) or not isinstance(item["judged_by"], str):
            raise QAInputError(f'{where}: "j" must be 0 or 1 and "judged_by" a string (as qa-label wrote them)')


def label_sample(report: dict[str, Any], limit: int, seed: int) -> list[dict[str, Any]]:
    """`limit` judged answers, round-robin over the deciding paths (LLM first), chosen with `seed`."""
    by_path: dict[str, list[dict[str, Any]]] = {}
    for item in _judged(report):
        by_path.setdefault(item["judged_by"], []).append(item)
    rng = random.Random(seed)
    for items in by_path.values():
        rng.shuffle(items)
    order = sorted(by_path, key=lambda path: (path != "llm", path))
    chosen: list[dict[str, Any]] = []
    while len(chosen) < limit and any(by_path[p] for p in order):
        for path in order:
            if by_path[path] and len(chosen) < limit:
                chosen.append(by_path[path].pop())
    return chosen


def agreement(labels: list[dict[str, Any]]) -> dict[str, Any]:
    """How often the judge's verdict equals the hand label, overall and per deciding path."""
    done = [item for item in labels if item.get("label") in (0, 1)]

    def share(items: list[dict[str, Any]]) -> dict[str, Any]:
        same = sum(1 for item in items if int(item["j"]) == int(item["label"]))
        return {"n": len(items), "agree": same, "rate": round(same / len(items), 3) if items else None}

    paths = sorted({item["judged_by"] for item in done})
    return {"labelled": len(done), "unlabelled": len(labels) - len(done), **share(done),
            "by_path": {path: share([i for i in done if i["judged_by"] == path]) for path in paths},
            "disagreements": [{k: i.get(k) for k in ("id", "config", "gold", "answer", "judged_by", "j", "label")}
                              for i in done if int(i["j"]) != int(i["label"])]}


def run_label(report_path: Path, labels_path: Path, limit: int = 60, seed: int = 0) -> dict[str, Any] | None:
    """Write a labelling sample (first call) or return the agreement of the labels (later calls)."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QAInputError(f"cannot read {report_path}: {exc}") from None
    if not isinstance(report, dict) or "questions" not in report:
        raise QAInputError(f"{report_path} is not a bench qa result")
    if labels_path.exists():
        try:
            labels = json.loads(labels_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise QAInputError(f"cannot read {labels_path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise QAInputError(f"{labels_path} is not valid JSON ({exc})") from None
        _check_labels(labels, labels_path)
        return agreement(labels)
    try:
        sample = label_sample(report, limit, seed)
    except QAInputError as exc:
        raise QAInputError(f"{report_path}: {exc}") from None
    if not sample:
        raise QAInputError(f"{report_path} has no judged answer to label")
    try:
        write_atomically(labels_path, sample)
    except OSError as exc:
        raise QAInputError(f"cannot write {labels_path}: {exc.strerror or exc}") from None
    return None


def format_agreement(result: dict[str, Any]) -> str:
    lines = [f"judge agreement: {result['agree']}/{result['n']} "
             + (f"({result['rate']:.0%})" if result["rate"] is not None else "") +
             (f", {result['unlabelled']} still unlabelled" if result["unlabelled"] else ""), "",
             "| decided by | labelled | agree | rate |", "|---|---|---|---|"]
    for path, entry in result["by_path"].items():
        rate = "" if entry["rate"] is None else f"{entry['rate']:.0%}"
        lines.append(f"| {path} | {entry['n']} | {entry['agree']} | {rate} |")
    return "\n".join(lines)
