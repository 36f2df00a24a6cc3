"""AutoGen AgentChat 0.7 (`AssistantAgent`) with MemoryScope long-term memory.

Session 1: the user tells an assistant a fact. Session 2: a brand-new assistant (and a freshly
opened engine on the same store) answers a question that needs it. The messages the model
received in session 2 are printed; the script exits 1 if the memory is not in them.

Offline by default (AutoGen's ReplayChatCompletionClient, the embedded store in a temporary
folder, the local embedder). With OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL)
or DASHSCOPE_API_KEY set, a real model answers; pass --offline to force the fake one.

    pip install "memoryscope-plugins[autogen]"
    python examples/autogen_agentchat_example.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import ChatCompletionClient, LLMMessage

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory, run_with_memory

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"


class ShowingContext(UnboundedChatCompletionContext):
    """The agent's usual model context, keeping a copy of what the model is given."""

    last: ClassVar[list[LLMMessage]] = []

    async def get_messages(self) -> list[LLMMessage]:
        messages = await super().get_messages()
        ShowingContext.last = list(messages)
        return messages


def model_client(offline: bool, replies: list[str]) -> tuple[ChatCompletionClient, str]:
    """A real OpenAI-compatible client when a key is set, else AutoGen's replay client."""
    if not offline and (os.environ.get("OPENAI_API_KEY") or os.environ.get("DASHSCOPE_API_KEY")):
        from autogen_ext.models.openai import OpenAIChatCompletionClient
        if os.environ.get("OPENAI_API_KEY"):
            model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
            kwargs: dict[str, Any] = {"api_key": os.environ["OPENAI_API_KEY"]}
            if os.environ.get("OPENAI_BASE_URL"):
                kwargs["base_url"] = os.environ["OPENAI_BASE_URL"]
        else:
            model = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
            kwargs = {"api_key": os.environ["DASHSCOPE_API_KEY"],
                      "base_url": os.environ.get("DASHSCOPE_BASE_URL",
                                                 "https://dashscope.aliyuncs.com/compatible-mode/v1")}
        try:
            return OpenAIChatCompletionClient(model=model, **kwargs), model
        except ValueError:  # a model autogen-ext does not know (with or without a base URL): describe it
            kwargs["model_info"] = {"vision": False, "function_calling": True, "json_output": True,
                                    "family": "unknown", "structured_output": False}
            return OpenAIChatCompletionClient(model=model, **kwargs), model
    from autogen_ext.models.replay import ReplayChatCompletionClient
    return ReplayChatCompletionClient(replies), "offline replay client"


async def main() -> int:
    offline = "--offline" in sys.argv
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"

        async with MemoryScope(path=store) as engine:  # session 1
            client, name = model_client(offline, ["(replay) Noted!"])
            print(f"model: {name}")
            agent = AssistantAgent("assistant", model_client=client, system_message="You are helpful. Answer briefly.",
                                   memory=[MemoryScopeMemory(engine, user_id="anna")])
            await run_with_memory(agent, FACT)  # answers, then records the exchange
            await client.close()
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        async with MemoryScope(path=store) as engine:  # session 2: new engine, new agent
            client, _ = model_client(offline, [f"(replay) Your dog is {EXPECTED}."])
            agent = AssistantAgent("assistant", model_client=client, system_message="You are helpful. Answer briefly.",
                                   model_context=ShowingContext(), memory=[MemoryScopeMemory(engine, user_id="anna")])
            result = await run_with_memory(agent, QUESTION)
            await client.close()
            seen = list(ShowingContext.last)
            print("\nsession 2: the messages the model received (after the system message):")
            for message in seen:
                print(f"  [{type(message).__name__}] {message.content}")
            print(f"\nsession 2: answer: {result.messages[-1].to_text()}")
            left = sum("<long_term_memory>" in str(m.content) for m in await agent.model_context.get_messages())
            print(f"memory blocks left in the agent's context after the turn: {left}")

    if EXPECTED not in "\n".join(str(m.content) for m in seen if type(m).__name__ == "SystemMessage"):
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
