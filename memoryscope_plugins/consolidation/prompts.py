"""Prompt sets as data files: ``prompts/<language>/<name>.yaml``, English and Chinese.

Each file holds the system prompt, the instructions, the JSON schema the answer must follow, a few
worked examples (input and the exact answer the instructions ask for), and a ``template`` with
``$placeholders`` for the variable part. The fixed part comes first in the rendered prompt, so
providers with prompt caching reuse it across calls.

Any key can be overridden by a file of the same name under ``consolidation.prompts_dir``
(``<prompts_dir>/<language>/<name>.yaml``); keys it does not set keep the packaged text.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Mapping

import yaml

from ..errors import ConfigError

LANGUAGES = ("en", "zh")
REQUIRED_KEYS = ("system", "template")
_CACHE: dict[tuple[str, str, str], "PromptSet"] = {}
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class PromptSet:
    """One operation's prompts in one language (see the module docstring for the keys)."""

    name: str
    language: str
    system: str
    template: str
    instructions: str = ""
    schema: str = ""
    examples: tuple[Mapping[str, str], ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def text(self, key: str, default: str = "") -> str:
        """A supplementary string of the file (``none``, ``no_longer_true``, ...)."""
        return str(self.extra.get(key, default))

    def system_message(self, **values: str) -> str:
        """System prompt + instructions + schema + examples (the fixed, cacheable part)."""
        labels = _LABELS[self.language]
        parts = [Template(self.system.strip()).safe_substitute(values)]
        if self.instructions.strip():
            parts.append(f"{labels['instructions']}\n{self.instructions.strip()}")
        if self.schema.strip():
            parts.append(f"{labels['schema']}\n{self.schema.strip()}")
        for number, example in enumerate(self.examples, start=1):
            parts.append(f"{labels['example']} {number}\n{labels['input']}\n{str(example['input']).strip()}\n"
                         f"{labels['output']}\n{_compact_json(str(example['output']))}")
        return "\n\n".join(parts)

    def user_message(self, **values: str) -> str:
        """The template filled with ``values`` (unknown ``$words`` are left as they are)."""
        return Template(self.template).safe_substitute(values).strip()

    def messages(self, **values: str) -> list[dict[str, str]]:
        """``[system, user]`` chat messages for this prompt."""
        return [{"role": "system", "content": self.system_message(**values)},
                {"role": "user", "content": self.user_message(**values)}]


_LABELS = {
    "en": {"instructions": "Instructions:", "schema": "Answer with JSON of this shape:",
           "example": "Example", "input": "Input:", "output": "Answer:"},
    "zh": {"instructions": "要求：", "schema": "回答的 JSON 格式：", "example": "示例", "input": "输入：",
           "output": "回答："},
}


def _compact_json(text: str) -> str:
    """Examples are stored readable; they are sent as one JSON line per item (fewer tokens)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(value, dict) and len(value) == 1:
        (key, items), = value.items()
        if isinstance(items, list):
            body = ",\n".join(json.dumps(item, ensure_ascii=False) for item in items)
            return f'{{"{key}": [\n{body}\n]}}' if items else f'{{"{key}": []}}'
    return json.dumps(value, ensure_ascii=False)


def _read_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"prompt file {where} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"prompt file {where} must hold a mapping of keys")
    return data


def _packaged(name: str, language: str) -> dict[str, Any]:
    resource = resources.files(__package__).joinpath("prompts").joinpath(language).joinpath(f"{name}.yaml")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no packaged prompt {name!r} for language {language!r}") from None
    return _read_yaml(text, f"prompts/{language}/{name}.yaml")


def load_prompt(name: str, language: str = "en", prompts_dir: str | Path | None = None) -> PromptSet:
    """The prompt set ``name`` in ``language`` ("en" or "zh"), with overrides from ``prompts_dir``.

    Raises:
        ConfigError: unknown language or prompt, an unreadable override, or a missing required key.
    """
    if language not in LANGUAGES:
        raise ConfigError(f"prompt language must be one of {LANGUAGES}, not {language!r}")
    key = (name, language, str(prompts_dir or ""))
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    data = _packaged(name, language)
    source = f"packaged:{language}/{name}.yaml"
    if prompts_dir is not None:
        override = Path(prompts_dir) / language / f"{name}.yaml"
        if override.is_file():
            try:
                data.update(_read_yaml(override.read_text(encoding="utf-8"), str(override)))
            except OSError as exc:
                raise ConfigError(f"cannot read prompt override {override}: {exc}") from None
            source = str(override)
    prompt = _build(name, language, data, source)
    with _CACHE_LOCK:
        _CACHE[key] = prompt
    return prompt


def _build(name: str, language: str, data: dict[str, Any], source: str) -> PromptSet:
    missing = [k for k in REQUIRED_KEYS if not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        raise ConfigError(f"prompt {source} lacks the required key(s) {missing}")
    examples = data.get("examples") or []
    if not isinstance(examples, list) or not all(
            isinstance(e, dict) and "input" in e and "output" in e for e in examples):
        raise ConfigError(f"prompt {source}: 'examples' must be a list of {{input, output}} mappings")
    known = {"name", "language", "system", "template", "instructions", "schema", "examples"}
    extra = {k: str(v) for k, v in data.items() if k not in known and v is not None}
    return PromptSet(name=name, language=language, system=str(data["system"]), template=str(data["template"]),
                     instructions=str(data.get("instructions") or ""), schema=str(data.get("schema") or ""),
                     examples=tuple(examples), extra=extra, source=source)


def clear_cache() -> None:
    """Forget loaded prompts (after editing override files in a running process)."""
    with _CACHE_LOCK:
        _CACHE.clear()
