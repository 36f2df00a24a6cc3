"""LangChain chains with MemoryScope: a classic ``ConversationChain`` memory, and the retriever.

Session 1: the user tells a chain a fact. Session 2: a brand-new chain (and a freshly opened
engine on the same store) answers a question that needs it. The prompt the model received in
session 2 is printed; the script exits 1 if the memory is not in it. The same memories are then
read through `MemoryScopeRetriever`, as LangChain Documents.

Offline by default (LangChain's FakeListChatModel, the embedded store in a temporary folder, the
local embedder). With OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) or
DASHSCOPE_API_KEY set, a real model answers through `langchain-openai`; pass --offline to force
the fake one.

    pip install "memoryscope-plugins[langchain]" langchain-openai
    python examples/langchain_chain_example.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.langchain import MemoryScopeChatMemory, MemoryScopeRetriever

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"


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


def new_chain(engine: MemoryScope, chat_model: BaseChatModel):
    from langchain_classic.chains import ConversationChain
    with warnings.catch_warnings():  # ConversationChain is deprecated upstream, still widely used
        warnings.simplefilter("ignore", DeprecationWarning)
        return ConversationChain(llm=chat_model, memory=MemoryScopeChatMemory(memory=engine, user_id="anna"))


def main() -> int:
    offline = "--offline" in sys.argv
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"

        with MemoryScope(path=store) as engine:  # session 1
            chat_model, name = make_model(offline, ["(fake model) Noted!"])
            print(f"model: {name}")
            new_chain(engine, chat_model).invoke({"input": FACT})
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        with MemoryScope(path=store) as engine:  # session 2: new engine, new chain
            chat_model, _ = make_model(offline, [f"(fake model) Your dog is {EXPECTED}."])
            spy = ShowPrompt()
            result = new_chain(engine, chat_model).invoke({"input": QUESTION}, {"callbacks": [spy]})
            print("\nsession 2: the prompt the model received:")
            for message in spy.last:
                print(f"  [{message.type}] {message.content}")
            print(f"\nsession 2: answer: {result['response']}")

            print("\nthe same memories through MemoryScopeRetriever:")
            for document in MemoryScopeRetriever(memory=engine, user_id="anna", top_k=3).invoke("my dog"):
                print(f"  {document.metadata['type']:<6} {document.metadata['score']:.3f}  {document.page_content}")

    if EXPECTED not in "\n".join(str(m.content) for m in spy.last).split(QUESTION)[0]:
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
