"""Classic AutoGen (`autogen.ConversableAgent`) with MemoryScope long-term memory.

Session 1: the user tells an assistant a fact. Session 2: a brand-new assistant (and a freshly
opened engine on the same store) answers a question that needs it. The prompt the model received
in session 2 is printed; the script exits 1 if the memory is not in it.

Offline by default (a fake model client, the embedded store in a temporary folder, the local
embedder). With OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) or DASHSCOPE_API_KEY
set, a real model answers; pass --offline to force the fake one.

    pip install "memoryscope-plugins[autogen]"
    python examples/autogen_classic_example.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from autogen import ConversableAgent

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.adapters.autogen_classic import MemoryCapability

FACT = "I adopted a beagle called Biscuit last spring."
QUESTION = "What is my dog's name?"
EXPECTED = "Biscuit"


class FakeClient:
    """AutoGen's custom model client protocol, answering without any network."""

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        self.config = config

    def create(self, params: dict[str, Any]) -> Any:
        system = "\n".join(str(m.get("content")) for m in params["messages"] if m.get("role") == "system")
        text = f"(fake model) Your dog is {EXPECTED}." if EXPECTED in system else "(fake model) Noted!"
        message = SimpleNamespace(content=text, role="assistant", tool_calls=None, function_call=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], model="fake", cost=0.0, usage=None)

    def message_retrieval(self, response: Any) -> list[str]:
        return [choice.message.content for choice in response.choices]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {}


def llm_config(offline: bool) -> tuple[dict[str, Any], bool]:
    """AutoGen llm_config for a real model when a key is set, else for the fake client."""
    if not offline and os.environ.get("OPENAI_API_KEY"):
        entry = {"model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), "api_key": os.environ["OPENAI_API_KEY"]}
        if os.environ.get("OPENAI_BASE_URL"):
            entry["base_url"] = os.environ["OPENAI_BASE_URL"]
        return {"config_list": [entry], "cache_seed": None}, False
    if not offline and os.environ.get("DASHSCOPE_API_KEY"):
        entry = {"model": os.environ.get("DASHSCOPE_MODEL", "qwen-plus"), "api_key": os.environ["DASHSCOPE_API_KEY"],
                 "base_url": os.environ.get("DASHSCOPE_BASE_URL",
                                            "https://dashscope.aliyuncs.com/compatible-mode/v1")}
        return {"config_list": [entry], "cache_seed": None}, False
    return {"config_list": [{"model": "fake", "model_client_cls": "FakeClient"}], "cache_seed": None}, True


def new_assistant(engine: MemoryScope, config: dict[str, Any], fake: bool,
                  prompts: list[list[dict[str, Any]]]) -> ConversableAgent:
    agent = ConversableAgent("assistant", system_message="You are a helpful assistant. Answer briefly.",
                             llm_config=config, human_input_mode="NEVER")
    if fake:
        agent.register_model_client(model_client_cls=FakeClient)  # type: ignore[arg-type]  # autogen types the class as an instance
    # see exactly what is sent to the model (AutoGen's LLM-input hook)
    def keep_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompts.append(messages)
        return messages

    agent.register_hook("safeguard_llm_inputs", keep_prompt)
    MemoryCapability(engine, user_id="anna").add_to_agent(agent)
    return agent


def main() -> int:
    config, fake = llm_config("--offline" in sys.argv)
    print(f"model: {'offline fake client' if fake else config['config_list'][0]['model']}")
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "memory.db"
        prompts: list[list[dict[str, Any]]] = []

        with MemoryScope(path=store) as engine:  # session 1
            user = ConversableAgent("user", llm_config=False, human_input_mode="NEVER")
            user.initiate_chat(new_assistant(engine, config, fake, prompts), message=FACT, max_turns=1, silent=True)
            print(f"session 1: recorded {engine.count('anna')} memories for anna")

        with MemoryScope(path=store) as engine:  # session 2: new engine, new agent
            prompts.clear()
            user = ConversableAgent("user", llm_config=False, human_input_mode="NEVER")
            result = user.initiate_chat(new_assistant(engine, config, fake, prompts), message=QUESTION,
                                        max_turns=1, silent=True)
            print("\nsession 2: the prompt the model received:")
            for message in prompts[-1]:
                print(f"  [{message['role']}] {message.get('content')}")
            print(f"\nsession 2: answer: {result.chat_history[-1]['content']}")

    if not prompts or EXPECTED not in "\n".join(str(m.get("content")) for m in prompts[-1]):
        print("FAILED: the memory from session 1 did not reach the model in session 2")
        return 1
    print("OK: the memory from session 1 reached the model in session 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
