"""LangChain 1.x agent (`create_agent`) with the MemoryScope middleware.

Session 1: the user tells an agent a fact. Session 2: a brand-new agent (new thread, freshly
opened engine on the same store) answers a question that needs it. The prompt the model received
in session 2 is printed; the script exits 1 if the memory is not in it.

Offline by default (LangChain's FakeListChatModel, the embedded store in a temporary folder, the
local embedder). With OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) or
DASHSCOPE_API_KEY set, a real model answers through `langchain-openai`; pass --offline to force
the fake one.

    pip install "memoryscope-plugins[langchain]" langchain-openai
    python examples/langchain_agent_example.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"


@dataclass
class UserContext:
    """Run-scoped context: the middleware takes the user id from here."""

    user_id: str


class ShowPrompt(BaseCallbackHandler):
    """Keeps the messages of each chat model call."""

    def __init__(self) -> None:
        self.last: list[BaseMessage] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.last = list(messages[0])


def make_model(offline: bool, replies: list[str]) -> tuple[BaseChatModel, str]:
    """A real OpenAI-compatible chat model when a key is set, else LangChain's fake one."""
    if not offline and (os.environ.get("OPENAI_API_KEY") or os.environ.get("DASHSCOPE_API_KEY")):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            sys.exit("a real model needs langchain-openai: pip install 'memoryscope-plugins[langchain]' "
                     "(or pass --offline)")
        if os.environ.get("OPENAI_API_KEY"):
            name = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
            return ChatOpenAI(model=name, api_key=os.environ["OPENAI_API_KEY"],
                              base_url=os.environ.get("OPENAI_BASE_URL")), name
        name = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
        return ChatOpenAI(model=name, api_key=os.environ["DASHSCOPE_API_KEY"],
                          base_url=os.environ.get("DASHSCOPE_BASE_URL",
                                                  "https://dashscope.aliyuncs.com/compatible-mode/v1")), name
    return FakeListChatModel(responses=replies), "offline FakeListChatModel"


def new_agent(engine: MemoryScope, chat_model: BaseChatModel):
    return create_agent(chat_model, tools=[], system_prompt="You are a helpful assistant. Answer briefly.",
                        middleware=[MemoryScopeMiddleware(engine)], context_schema=UserContext,
                        checkpointer=InMemorySaver())


def main() -> int:
    offline = "--offline" in sys.argv
    anna = UserContext(user_id="anna")
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"

        with MemoryScope(path=store) as engine:  # session 1
            chat_model, name = make_model(offline, ["(fake model) Noted!"])
            print(f"model: {name}")
            new_agent(engine, chat_model).invoke({"messages": [{"role": "user", "content": FACT}]},
                                                 {"configurable": {"thread_id": "session-1"}}, context=anna)
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        with MemoryScope(path=store) as engine:  # session 2: new engine, new agent, new thread
            chat_model, _ = make_model(offline, [f"(fake model) Your dog is {EXPECTED}."])
            spy = ShowPrompt()
            agent = new_agent(engine, chat_model)
            config: Any = {"configurable": {"thread_id": "session-2"}, "callbacks": [spy]}
            out = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config, context=anna)
            print("\nsession 2: the prompt the model received:")
            for message in spy.last:
                print(f"  [{message.type}] {message.content}")
            print(f"\nsession 2: answer: {out['messages'][-1].content}")
            state = agent.get_state({"configurable": {"thread_id": "session-2"}}).values["messages"]
            left = sum("<long_term_memory>" in str(m.content) for m in state)
            print(f"memory blocks in the agent's saved state: {left}")

    if EXPECTED not in "\n".join(str(m.content) for m in spy.last if m.type == "system"):
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
