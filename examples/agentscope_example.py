"""AgentScope 2.x (`agentscope.agent.Agent`) with the MemoryScope middleware.

Session 1: the user tells an agent a fact. Session 2: a brand-new agent (and a freshly opened
engine on the same store) answers a question that needs it. The messages the model received in
session 2 are printed; the script exits 1 if the memory is not in them.

Offline by default (a fake `ChatModelBase`, the embedded store in a temporary folder, the local
embedder). With DASHSCOPE_API_KEY, or OPENAI_API_KEY (and optionally OPENAI_BASE_URL,
OPENAI_MODEL), a real model answers; pass --offline to force the fake one.

    pip install "memoryscope-plugins[agentscope]"
    python examples/agentscope_example.py
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase, ChatResponse
from pydantic import BaseModel

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"


class FakeModel(ChatModelBase):
    """An offline chat model: answers from the memory note when there is one."""

    class Parameters(BaseModel):
        pass

    def __init__(self) -> None:
        from agentscope.credential import OpenAICredential
        super().__init__(credential=OpenAICredential(api_key="unused"), model="fake", parameters=self.Parameters(),
                         stream=False, max_retries=0)
        self.formatter = OpenAIChatFormatter()

    async def _call_api(self, model_name: str, messages: list[Msg], tools: list | None = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        formatted = str(await self.formatter.format(messages))
        text = f"(fake model) Your dog is {EXPECTED}." if "long_term_memory" in formatted else "(fake model) Noted!"
        return ChatResponse(content=[TextBlock(text=text)], is_last=True)


class ShowPrompt(MiddlewareBase):
    """Keeps the messages of each model call (placed after the memory middleware, it sees them)."""

    def __init__(self) -> None:
        self.last: list[Msg] = []

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        self.last = copy.deepcopy(list(input_kwargs["messages"]))  # as sent, before the reply grows
        return await next_handler(**input_kwargs)


def make_model(offline: bool) -> tuple[ChatModelBase, str]:
    """DashScope or an OpenAI-compatible model when a key is set, else the fake one."""
    if not offline and os.environ.get("DASHSCOPE_API_KEY"):
        from agentscope.credential import DashScopeCredential
        from agentscope.model import DashScopeChatModel
        name = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
        credential = DashScopeCredential(api_key=os.environ["DASHSCOPE_API_KEY"])
        if os.environ.get("DASHSCOPE_BASE_URL"):
            credential.base_url = os.environ["DASHSCOPE_BASE_URL"]
        return DashScopeChatModel(credential=credential, model=name, stream=False), name
    if not offline and os.environ.get("OPENAI_API_KEY"):
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIChatModel
        name = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        openai_credential = OpenAICredential(api_key=os.environ["OPENAI_API_KEY"],
                                             base_url=os.environ.get("OPENAI_BASE_URL"))
        return OpenAIChatModel(credential=openai_credential, model=name, stream=False), name
    return FakeModel(), "offline fake model"


def describe(message: Msg) -> str:
    parts = []
    for block in message.content if isinstance(message.content, list) else [message.content]:
        parts.append(getattr(block, "text", None) or getattr(block, "hint", None) or str(block))
    return f"[{message.role}/{message.name}] " + " ".join(str(p) for p in parts)


async def main() -> int:
    offline = "--offline" in sys.argv
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"

        async with MemoryScope(path=store) as engine:  # session 1
            model, name = make_model(offline)
            print(f"model: {name}")
            agent = Agent(name="Friday", system_prompt="You are Friday, a helpful assistant. Answer briefly.",
                          model=model, middlewares=[MemoryScopeMiddleware(engine, user_id="anna")])
            await agent.reply(UserMsg("anna", FACT))
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        async with MemoryScope(path=store) as engine:  # session 2: new engine, new agent
            model, _ = make_model(offline)
            spy = ShowPrompt()
            agent = Agent(name="Friday", system_prompt="You are Friday, a helpful assistant. Answer briefly.",
                          model=model, middlewares=[MemoryScopeMiddleware(engine, user_id="anna"), spy])
            reply = await agent.reply(UserMsg("anna", QUESTION))
            print("\nsession 2: the messages the model received:")
            for message in spy.last:
                print("  " + describe(message))
            print(f"\nsession 2: answer: {reply.get_text_content()}")
            left = sum(m.name == "memory" for m in agent.state.context)
            print(f"memory notes left in the agent's context after the reply: {left}")

    if EXPECTED not in "\n".join(describe(m) for m in spy.last if m.name == "memory"):
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
