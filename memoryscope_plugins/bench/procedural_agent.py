"""Part (c) of `bench procedural`: the configured model as the agent on a scenario's new task.

The model sees the task, the tools (name and signature, as the scenario gives them), the
scenario's ``context`` (facts a real agent would have, e.g. an id) and, in one of the two asks,
the "What worked before" / "Tools that failed before" part of `retrieve`'s context (never the
user's memories). It answers with its first tool call as JSON ``{"tool": ..., "arguments": {...}}``.
The call avoids the recorded error when its tool is one of ``expect.tool`` and every argument named
in ``expect.arguments`` that it gives matches that regular expression, searched in the value's JSON
text. This scores one call, not a whole agent loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ModelError
from ..models.structured import chat_json
from ..retrieval.procedures import HEADINGS

SYSTEM = {
    "en": "You are an AI agent that calls tools. Answer with your first tool call only, as one JSON object: "
          '{"tool": "<tool name>", "arguments": {...}}.',
    "zh": "你是一个会调用工具的 AI 助手。只回答你要做的第一次工具调用，写成一个 JSON 对象："
          '{"tool": "<工具名>", "arguments": {...}}。',
}
LABELS = {"en": ("Tools:", "Facts:", "Task:"), "zh": ("工具：", "已知信息：", "任务：")}


def memory_block(context: str, language: str) -> str:
    """The procedural part of a `retrieve` context: from its first procedural heading on."""
    starts = [context.find(h) for pair in HEADINGS.values() for h in pair if h in context]
    return context[min(starts):].strip() if starts else ""


def prompt(scenario: dict[str, Any], block: str, language: str) -> list[dict[str, str]]:
    """The agent's messages for the scenario's new task, with ``block`` (may be empty)."""
    spec = scenario["agent"]
    tools, facts, task = LABELS[language]
    lines = [tools, *[f"- {signature}" for signature in spec.get("tools", {}).values()]]
    if spec.get("context"):
        lines += [facts, str(spec["context"])]
    if block:
        lines += ["", block]
    lines += ["", f"{task} {scenario['new_task']['query']}"]
    return [{"role": "system", "content": SYSTEM[language]}, {"role": "user", "content": "\n".join(lines)}]


def avoids(call: Any, expect: dict[str, Any]) -> bool:
    """Whether a first call (the model's JSON) is of an expected tool with the expected argument shapes."""
    if not isinstance(call, dict):
        return False
    tools = expect.get("tool")
    allowed = [tools] if isinstance(tools, str) else list(tools or [])
    if allowed and call.get("tool") not in allowed:
        return False
    arguments = call.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    for name, pattern in (expect.get("arguments") or {}).items():
        if name in arguments and not re.search(pattern, json.dumps(arguments[name], ensure_ascii=False)):
            return False
    return True


def _ask(model: Any, messages: list[dict[str, str]]) -> tuple[Any, int]:
    try:
        value, _ = chat_json(model, messages, required_keys=["tool"], max_repairs=0, max_tokens=300)
    except ModelError as exc:
        return {"error": type(exc).__name__}, 1
    return value, 1


def run_agent(scenario: dict[str, Any], context: str, model: Any, *, language: str) -> dict[str, Any]:
    """Ask the model for its first call with and without the procedural block; score both."""
    if model is None:
        raise ValueError("the agent part needs a model")
    lang = language if language in SYSTEM else "en"
    block = memory_block(context, lang)
    expect = scenario["agent"].get("expect") or {}
    out: dict[str, Any] = {"block": block, "calls": 0}
    for key, shown in (("with_memory", block), ("without_memory", "")):
        call, calls = _ask(model, prompt(scenario, shown, lang))
        out["calls"] += calls
        out[key] = {"call": call, "avoided": avoids(call, expect)}
    return out
