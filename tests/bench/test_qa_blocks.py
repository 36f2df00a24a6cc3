"""bench/qa_blocks.py: the `turns` blocks `bench qa` would give, and answers for only the questions
whose block changed, through bench qa's own prompt and judge (a fake model at the HTTP boundary)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

from tests.bench.test_qa import DATA, ScriptedModel, answer_requests, config_file
from tests.support.bench_scripts import load_bench_script
from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer


def _main(module: ModuleType, monkeypatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["qa_blocks.py", *argv])
    module.main()


def test_only_changed_blocks_are_answered_and_judged(tmp_path: Path, monkeypatch) -> None:
    module = load_bench_script("qa_blocks.py", "qa_blocks_bench")
    with FakeModelServer() as server:
        server.route(OPENAI_CHAT, ScriptedModel())
        config = str(config_file(tmp_path, server.url + "/v1"))
        common = ["--config", config, "--data", str(DATA)]
        _main(module, monkeypatch, "dump", *common, "--out", str(tmp_path / "a.json"))
        blocks = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
        assert len(blocks) == 13 and all("<long_term_memory>" in block for block in blocks.values())
        _main(module, monkeypatch, "dump", *common, "--out", str(tmp_path / "b.json"))
        assert json.loads((tmp_path / "b.json").read_text(encoding="utf-8")) == blocks  # deterministic
        assert answer_requests(server) == []  # dumping calls no model

        changed_id = next(iter(blocks))
        other = dict(blocks, **{changed_id: blocks[changed_id] + "\nanother line"})
        (tmp_path / "b.json").write_text(json.dumps(other), encoding="utf-8")
        out = tmp_path / "answers.json"
        argv = ["answer", *common, "--blocks", str(tmp_path / "a.json"), "--other", str(tmp_path / "b.json"),
                "--out", str(out)]
        _main(module, monkeypatch, *argv)
        answers = json.loads(out.read_text(encoding="utf-8"))
        assert list(answers) == [changed_id] and answers[changed_id]["j"] in (0, 1)
        assert len(answer_requests(server)) == 1
        sent = answer_requests(server)[0].json["messages"][0]["content"]
        assert blocks[changed_id] in sent and "another line" not in sent  # answered with --blocks
        _main(module, monkeypatch, *argv)  # resumed: nothing answered twice
        assert len(answer_requests(server)) == 1
