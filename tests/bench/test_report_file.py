"""The bench scripts' --json file and the CLI's --out are written by export's rules (`safe_write`)."""

from __future__ import annotations

import json

import pytest

from memoryscope_plugins.bench.report_file import print_report, write_report
from memoryscope_plugins.errors import ValidationError


def test_the_printed_report_is_the_file_written(tmp_path, capsys):
    out = tmp_path / "report.json"
    print_report({"recall": 0.5, "name": "x"}, out)
    printed = capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == printed and json.loads(printed) == {"recall": 0.5, "name": "x"}
    print_report({"recall": 0.5})  # no path: printed only
    assert json.loads(capsys.readouterr().out) == {"recall": 0.5}


def test_a_link_is_written_through_and_a_folder_refused(tmp_path):
    target = tmp_path / "kept.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_report(link, "new\n")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new\n"
    with pytest.raises(ValidationError, match="folder"):
        write_report(tmp_path, "x")
