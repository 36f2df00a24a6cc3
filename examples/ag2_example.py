"""ag2 1.x (`ag2.Agent`) with the MemoryScope plugin.

Session 1: the user tells an agent a fact. Session 2: a brand-new agent (and a freshly opened
engine on the same store) answers a question that needs it. The system prompt the model received
in session 2 is printed; the script exits 1 if the memory is not in it.

Offline by default (a fake ag2 model client, the embedded store in a temporary folder, the local
embedder). With OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL), or DASHSCOPE_API_KEY
(optionally DASHSCOPE_MODEL, DASHSCOPE_BASE_URL), a real model answers; pass --offline to force
the fake one.

    pip install "memoryscope-plugins[ag2]"
    python examples/ag2_example.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ag2 import Agent, Context
from ag2.config import ModelConfig, ModelProvider
from ag2.events import BaseEvent, ModelMessage, ModelResponse
from ag2.testing import TrackingConfig

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.ag2 import MemoryScopePlugin

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"
PROMPT = "You are a helpful assistant. Answer briefly."


class FakeClient:
    """An offline ag2 model client: answers from the memory block when the system prompt has one."""

    async def __call__(self, messages: Sequence[BaseEvent], context: Context, **kwargs: Any) -> ModelResponse:
        recalled = "long_term_memory" in "\n".join(context.prompt)
        message = ModelMessage(f"(fake model) Your dog is {EXPECTED}." if recalled else "(fake model) Noted!")
        await context.send(message)
        return ModelResponse(message)


class FakeConfig(ModelConfig):
    """The ag2 model config that builds `FakeClient`."""

    @property
    def provider(self) -> ModelProvider:
        return ModelProvider.OPENAI

    @property
    def model(self) -> str:
        return "fake"

    def copy(self) -> FakeConfig:
        return self

    def create(self) -> FakeClient:
        return FakeClient()


def make_config(offline: bool) -> tuple[ModelConfig, str]:
    """An OpenAI-compatible or DashScope model when a key is set, else the fake one."""
    if not offline and os.environ.get("OPENAI_API_KEY"):
        from ag2.config import OpenAIConfig
        name = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        return OpenAIConfig(model=name, api_key=os.environ["OPENAI_API_KEY"],
                            base_url=os.environ.get("OPENAI_BASE_URL")), name
    if not offline and os.environ.get("DASHSCOPE_API_KEY"):
        from ag2.config import DashScopeConfig
        name = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
        extra: dict[str, Any] = ({"base_url": os.environ["DASHSCOPE_BASE_URL"]}
                                 if os.environ.get("DASHSCOPE_BASE_URL") else {})
        return DashScopeConfig(model=name, api_key=os.environ["DASHSCOPE_API_KEY"], **extra), name
    return FakeConfig(), "offline fake model"


async def main() -> int:
    offline = "--offline" in sys.argv
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"

        async with MemoryScope(path=store) as engine:  # session 1
            config, name = make_config(offline)
            print(f"model: {name}")
            agent = Agent("assistant", PROMPT, config=config, plugins=[MemoryScopePlugin(engine, user_id="anna")])
            await agent.ask(FACT)
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        async with MemoryScope(path=store) as engine:  # session 2: new engine, new agent
            config, _ = make_config(offline)
            spy = TrackingConfig(config)  # keeps the prompt of each model call
            agent = Agent("assistant", PROMPT, config=spy, plugins=[MemoryScopePlugin(engine, user_id="anna")])
            reply = await agent.ask(QUESTION)
            system_prompt = "\n".join(spy.calls[-1].prompt)
            print("\nsession 2: the system prompt the model received:")
            print("  " + system_prompt.replace("\n", "\n  "))
            print(f"\nsession 2: answer: {reply.body}")
            history = await reply.history.get_events()
            left = sum("long_term_memory" in str(event) for event in history)
            print(f"memory blocks left in the agent's conversation history after the reply: {left}")

    if EXPECTED not in system_prompt:
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
