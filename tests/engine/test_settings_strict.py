"""Issue 29 item 8: a key no setting has, inside a section of the file or the environment, is a ConfigError
naming it (not silently the default); the open-ended settings stay open; the variables that are not
settings are left alone."""

from __future__ import annotations

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import ConfigError
from memoryscope_plugins.settings import Settings


@pytest.mark.parametrize("section, key", [("store", "paht"), ("retrieval", "top_kk"), ("llm", "modle"),
                                          ("embedder", "provder"), ("reranker", "wieght"),
                                          ("consolidation", "every_message")])
def test_a_typo_in_a_file_section_names_the_key(tmp_path, section, key):
    path = tmp_path / "settings.yaml"
    path.write_text(f"{section}: {{{key}: 3}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{section}\.{key}"):
        Settings.load(path)
    with pytest.raises(ConfigError, match=rf"{section}\.{key}"):
        MemoryScope(str(path))


def test_a_typo_in_an_environment_variable_names_it(monkeypatch):
    monkeypatch.setenv("MEMORYSCOPE_RETRIEVAL__TOPK", "3")
    with pytest.raises(ConfigError, match=r"retrieval\.topk"):
        Settings()
    monkeypatch.delenv("MEMORYSCOPE_RETRIEVAL__TOPK")
    monkeypatch.setenv("MEMORYSCOPE_RETRIEVL__TOP_K", "3")
    with pytest.raises(ConfigError, match="MEMORYSCOPE_RETRIEVL__TOP_K"):
        Settings()
    monkeypatch.delenv("MEMORYSCOPE_RETRIEVL__TOP_K")
    monkeypatch.setenv("MEMORYSCOPE_LANGUAGES", "zh")
    with pytest.raises(ConfigError, match="MEMORYSCOPE_LANGUAGES"):
        Settings.load()


def test_right_keys_and_open_ended_settings_still_work(tmp_path, monkeypatch):
    for name in ("HOME", "CONFIG", "SERVER_KEYS", "LOCAL_EMBEDDER_PATH", "EXAMPLES_LIVE", "TEST_PG_USER"):
        if name != "CONFIG":
            monkeypatch.setenv(f"MEMORYSCOPE_{name}", str(tmp_path / name.lower()))
    monkeypatch.setenv("MEMORYSCOPE_RETRIEVAL__TOP_K", "3")
    path = tmp_path / "settings.yaml"
    path.write_text("llm: {extra_body: {repeat_penalty: 1.1, enable_thinking: false}}\n"
                    "retrieval: {type_weights: {insight: 2.0, my_type: 1.0}}\n", encoding="utf-8")
    settings = Settings.load(path)
    assert settings.retrieval.top_k == 3
    assert settings.llm.extra_body == {"repeat_penalty": 1.1, "enable_thinking": False}
    assert settings.retrieval.type_weights["my_type"] == 1.0


def test_the_error_never_quotes_the_value(monkeypatch):
    monkeypatch.setenv("MEMORYSCOPE_LLM__APIKEY", "sk-secret-value-0123456789")
    with pytest.raises(ConfigError) as caught:
        Settings()
    assert "apikey" in str(caught.value) and "sk-secret" not in str(caught.value)
