"""The fake model of the procedure tests: `Teacher` answers procedure prompts from a queue."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.support.consolidation_helpers import Brain, parse_prompt
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion


def completion(text: str, finish_reason: str = "stop") -> Reply:
    body = openai_completion(text, prompt_tokens=100, completion_tokens=50)
    body["choices"][0]["finish_reason"] = finish_reason
    return Reply(json=body)


class Teacher(Brain):
    """The user's messages are consolidated as `Brain` does; procedure prompts are answered from
    `queue` (text, finish_reason), or by a function of the prompt's text."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[tuple[str, str] | Callable[[str], tuple[str, str]]] = []
        self.procedure_prompts: list[str] = []

    def __call__(self, server: Any, request: Any) -> Reply:
        messages = (request.json or {}).get("messages") or []
        first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
        if "Procedures it already has" in first_user or "它已有的做法" in first_user:
            self.procedure_prompts.append(first_user)
            item = self.queue.pop(0) if self.queue else (json.dumps({"procedures": []}), "stop")
            text, reason = item(first_user) if callable(item) else item
            return completion(text, reason)
        prompt = parse_prompt(messages)
        with self.lock:
            self.prompts.append(prompt)
        return completion(self.answer(prompt))


@pytest.fixture
def teacher(server):
    fake = Teacher()
    server.route(OPENAI_CHAT, fake)
    return fake
