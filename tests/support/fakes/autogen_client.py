"""A classic-AutoGen model client for tests (AutoGen's custom client protocol), offline.

Register it with ``{"model": "fake", "model_client_cls": "FakeClient"}`` in the config list and
``agent.register_model_client(model_client_cls=FakeClient)``. It answers from `replies` (a queue),
else ``"reply N"``, and keeps every prompt in `prompts`. Reset both between tests.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar


class FakeClient:
    prompts: ClassVar[list[list[dict[str, Any]]]] = []
    replies: ClassVar[list[str]] = []

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        self.config = config

    def create(self, params: dict[str, Any]) -> Any:
        FakeClient.prompts.append([dict(m) for m in params["messages"]])
        text = FakeClient.replies.pop(0) if FakeClient.replies else f"reply {len(FakeClient.prompts)}"
        message = SimpleNamespace(content=text, role="assistant", tool_calls=None, function_call=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], model="fake", cost=0.0, usage=None)

    def message_retrieval(self, response: Any) -> list[str]:
        return [choice.message.content for choice in response.choices]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {}

    @classmethod
    def reset(cls) -> None:
        cls.prompts, cls.replies = [], []
