"""How often `bench qa`'s judge agrees with hand labels: per deterministic rule (how many labelled
answers it decides, and its agreement there) and overall, the current rules first and, where they
leave an answer to the LLM, the LLM verdict recorded in the result files (no model is called).

    python bench/judge_agreement.py --labels labels_zh.json --results zh40.json \\
        --config-labels en30.json=labels_en_hand.json

`--labels`: files written by `bench qa-label` (items with question, gold, answer, label, and the
verdict as run: j, judged_by). `--config-labels RESULT=LABELS`: hand labels kept as
{"config": [label per question, in RESULT's question order]}. `--results`: more `bench qa` files
whose LLM verdicts may be used (the same question and answer text). `--show` prints every
disagreement.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from memoryscope_plugins.bench.qa_judge import deterministic_verdict


def _key(question: str, answer: str) -> tuple[str, str]:
    return question.strip(), " ".join((answer or "").split()).lower()


def _llm_verdicts(results: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    verdicts: dict[tuple[str, str], int] = {}
    for report in results:
        for row in report.get("questions", []):
            for answer in row.get("answers", {}).values():
                judged = answer.get("judged_by") == "llm" and answer.get("j") is not None
                if judged and answer.get("text") is not None:
                    verdicts.setdefault(_key(row["question"], answer["text"]), int(answer["j"]))
    return verdicts


def load_items(labels: list[Path], config_labels: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for path in labels:
        for item in json.loads(path.read_text(encoding="utf-8")):
            if item.get("label") in (0, 1):
                items.append({**item, "source": path.name})
    for pair in config_labels:
        result_path, labels_path = (Path(part) for part in pair.split("=", 1))
        report = json.loads(result_path.read_text(encoding="utf-8"))
        results.append(report)
        for config, values in json.loads(labels_path.read_text(encoding="utf-8")).items():
            for row, label in zip(report["questions"], values):
                answer = row["answers"][config]
                items.append({"id": row["id"], "config": config, "question": row["question"], "gold": row["gold"],
                              "answer": answer["text"], "j": answer.get("j"), "judged_by": answer.get("judged_by"),
                              "label": label, "source": labels_path.name})
    return items, results


def measure(items: list[dict[str, Any]], llm: dict[tuple[str, str], int]) -> dict[str, Any]:
    by_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # rule -> [decided, agreed]
    as_run = [0, 0]
    now = [0, 0]
    no_llm = 0
    disagreements = []
    for item in items:
        label = int(item["label"])
        if item.get("j") is not None:
            as_run[0] += 1
            as_run[1] += int(int(item["j"]) == label)
        verdict = deterministic_verdict(item["answer"] or "", item["gold"], item["question"])
        if verdict is not None:
            rule, j = verdict.rule, int(verdict.correct)
        else:
            rule = "llm"
            old = llm.get(_key(item["question"], item["answer"] or ""))
            if old is None and item.get("judged_by") == "llm" and item.get("j") is not None:
                old = int(item["j"])
            if old is None:
                no_llm += 1
                continue
            j = old
        by_rule[rule][0] += 1
        by_rule[rule][1] += int(j == label)
        now[0] += 1
        now[1] += int(j == label)
        if j != label:
            disagreements.append({**item, "now_by": rule, "now_j": j})
    return {"as_run": as_run, "now": now, "by_rule": dict(by_rule), "no_llm_verdict": no_llm,
            "disagreements": disagreements}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", nargs="*", type=Path, default=[])
    parser.add_argument("--config-labels", nargs="*", default=[])
    parser.add_argument("--results", nargs="*", type=Path, default=[])
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    items, results = load_items(args.labels, args.config_labels)
    results += [json.loads(path.read_text(encoding="utf-8")) for path in args.results]
    groups = {"all": items}
    for item in items:
        groups.setdefault(item["source"], []).append(item)
    llm = _llm_verdicts(results)
    for name, chosen in groups.items():
        out = measure(chosen, llm)
        as_run, now = out["as_run"], out["now"]
        print(f"## {name}: {len(chosen)} labelled answers")
        print(f"as run: {as_run[1]}/{as_run[0]} ({as_run[1] / max(1, as_run[0]):.0%}); "
              f"current rules + recorded LLM verdicts: {now[1]}/{now[0]} ({now[1] / max(1, now[0]):.0%})"
              + (f"; {out['no_llm_verdict']} left to the LLM with no recorded verdict"
                 if out["no_llm_verdict"] else ""))
        print("| decided by | answers | agree |\n|---|---|---|")
        for rule, (decided, agreed) in sorted(out["by_rule"].items(), key=lambda kv: (kv[0] == "llm", kv[0])):
            print(f"| {rule} | {decided} | {agreed} ({agreed / decided:.0%}) |")
        if args.show and name == "all":
            for item in out["disagreements"]:
                print(f"- [{item['source']} {item['id']} {item['config']}] label {item['label']}, "
                      f"{item['now_by']} says {item['now_j']}\n  Q: {item['question']}\n  gold: {item['gold']}\n"
                      f"  answer: {item['answer']}")
        print()


if __name__ == "__main__":
    main()
