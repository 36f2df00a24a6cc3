"""Shared pieces of the consolidation / chat tests (no tests here).

`Brain` plays the LLM behind the fake OpenAI-compatible server: it reads the prompt the engine
really sent (the new messages, the related memories with their M-labels, the observations and
insights with their O/I labels) and answers with JSON the way a good model would, following
simple rules the tests control. Nothing of ours is patched: the engine talks HTTP through the
real `openai` client.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from fakes.fake_model_server import OPENAI_CHAT, FakeModelServer, Reply, openai_completion

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.models.openai_compat import OpenAIChatModel
from memoryscope_plugins.models.retry import RetryPolicy

NEW_LINE = re.compile(r"^\[(\d+)\] \[([^\]]*)\] ([^:]+): (.*)$")
MEM_LINE = re.compile(r"^(M\d+) \[[^\]]*\] (.*)$")
OBS_LINE = re.compile(r"^(O\d+) \[[^\]]*\] (.*?)( \(no longer true\)|（已不再成立）)?$")
INS_LINE = re.compile(r"^(I\d+) (.*?)(?: \((?:rests on|依据) ([^)]*)\)|（依据 ([^）]*)）)?$")


@dataclass
class Prompt:
    """The variable part of a prompt the engine sent, parsed back."""

    kind: str  # consolidate | reflect | chat
    system: str
    user: str
    new: list[tuple[int, str, str, str]] = field(default_factory=list)  # (n, stamp, speaker, content)
    memories: dict[str, str] = field(default_factory=dict)  # M-label -> content
    observations: dict[str, str] = field(default_factory=dict)  # O-label -> content
    expired: set[str] = field(default_factory=set)  # O-labels marked no longer true
    insights: dict[str, str] = field(default_factory=dict)  # I-label -> content
    messages: list[dict] = field(default_factory=list)


def parse_prompt(messages: list[dict]) -> Prompt:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = messages[-1]["content"] if messages else ""
    if '"observations"' in system:
        kind = "consolidate"
    elif '"insights"' in system:
        kind = "reflect"
    else:
        kind = "chat"
    prompt = Prompt(kind=kind, system=system, user=user, messages=messages)
    # the user message of the first exchange (a re-ask appends more messages)
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    for line in first_user.splitlines():
        if (match := NEW_LINE.match(line)):
            prompt.new.append((int(match.group(1)), match.group(2), match.group(3), match.group(4)))
        elif (match := MEM_LINE.match(line)):
            prompt.memories[match.group(1)] = match.group(2)
        elif (match := OBS_LINE.match(line)):
            prompt.observations[match.group(1)] = match.group(2)
            if match.group(3):
                prompt.expired.add(match.group(1))
        elif (match := INS_LINE.match(line)):
            prompt.insights[match.group(1)] = match.group(2)
    return prompt


def obs(content: str, messages: list[int], *, about: str = "Anna", kind: str = "fact", reality: str = "real",
        time: str | None = None, date: str | None = None, relation: str = "new", memory: str | None = None,
        importance: int = 2) -> dict:
    return {"content": content, "about": about, "kind": kind, "messages": messages, "reality": reality,
            "time": time, "date": date, "relation": relation, "memory": memory, "importance": importance}


def default_extract(prompt: Prompt) -> list[dict]:
    """A small rule-based 'model': one observation per user message, with a few learned phrases."""
    out: list[dict] = []
    for n, _stamp, speaker, content in prompt.new:
        if speaker in ("assistant",):
            continue
        low = content.lower()
        if low.strip(" !.") in ("hi", "hello", "thanks", "thank you", "ok"):
            continue  # small talk
        if "in my novel" in low:
            out.append(obs(f"{speaker} is writing a novel.", [n]))
            out.append(obs(f"In {speaker}'s novel, the narrator is a pilot.", [n], reality="fiction", importance=1))
            continue
        if "started eating fish again" in low:
            target = next((label for label, text in prompt.memories.items() if "vegetarian" in text), None)
            out.append(obs(f"{speaker} started eating fish again; {speaker} is no longer vegetarian.", [n],
                           kind="preference", relation="replaces" if target else "new", memory=target))
            continue
        if "vegetarian" in low:
            text = f"{speaker} is vegetarian."
            target = next((label for label, mem in prompt.memories.items() if mem == text), None)
            out.append(obs(text, [n], kind="preference", relation="same" if target else "new", memory=target))
            continue
        if "last friday" in low:
            # a deliberately wrong date: the rule-based parser must correct it
            out.append(obs(f"{speaker} ran a half marathon.", [n], kind="event", time="last Friday",
                           date="2026-05-15"))
            continue
        text = f"{speaker} said: {content}"
        target = next((label for label, mem in prompt.memories.items() if mem == text), None)
        out.append(obs(text, [n], relation="same" if target else "new", memory=target))
    return out


def default_reflect(prompt: Prompt) -> list[dict]:
    """One insight per topic word found in the observations, updating an existing one when shown."""
    insights = []
    food = [label for label, text in prompt.observations.items()
            if ("vegetarian" in text or "fish" in text)]
    if food:
        current = [prompt.observations[label] for label in food if label not in prompt.expired]
        existing = next((label for label, text in prompt.insights.items() if text.startswith("Food preferences")),
                        None)
        insights.append({"subject": "Food preferences of Anna", "value": " ".join(current) or "unknown",
                         "sources": food, "update": existing, "merge": []})
    others = [label for label in prompt.observations if label not in food and label not in prompt.expired]
    if others:
        existing = next((label for label, text in prompt.insights.items() if text.startswith("Life of Anna")), None)
        insights.append({"subject": "Life of Anna", "value": "; ".join(prompt.observations[l] for l in others),
                         "sources": others, "update": existing, "merge": []})
    return insights


class Brain:
    """The fake model's behaviour. Replace `extract` / `reflect` / `reply` per test."""

    def __init__(self) -> None:
        self.extract: Callable[[Prompt], list[dict] | str] = default_extract
        self.reflect: Callable[[Prompt], list[dict] | str] = default_reflect
        self.reply: Callable[[Prompt], str] = lambda prompt: "Noted!"
        self.prompts: list[Prompt] = []
        self.lock = threading.Lock()

    def kinds(self) -> list[str]:
        with self.lock:
            return [p.kind for p in self.prompts]

    def answer(self, prompt: Prompt) -> str:
        if prompt.kind == "consolidate":
            value = self.extract(prompt)
            return value if isinstance(value, str) else json.dumps({"observations": value}, ensure_ascii=False)
        if prompt.kind == "reflect":
            value = self.reflect(prompt)
            return value if isinstance(value, str) else json.dumps({"insights": value}, ensure_ascii=False)
        return self.reply(prompt)

    def __call__(self, server: FakeModelServer, request: Any) -> Reply:
        body = request.json or {}
        prompt = parse_prompt(body.get("messages") or [])
        with self.lock:
            self.prompts.append(prompt)
        text = self.answer(prompt)
        prompt_chars = sum(len(m.get("content", "")) for m in prompt.messages)
        if body.get("stream"):
            from fakes.fake_model_server import openai_chunks
            pieces = [text[i:i + 5] for i in range(0, len(text), 5)] or [""]
            return Reply(sse=openai_chunks(pieces, body.get("model") or "fake"))
        return Reply(json=openai_completion(text, body.get("model") or "fake", prompt_tokens=prompt_chars // 4,
                                            completion_tokens=max(1, len(text) // 4)))


    def dashscope(self, server: FakeModelServer, request: Any) -> Reply:
        """The same behaviour behind the DashScope-native generation route."""
        from fakes.fake_model_server import dashscope_message
        body = request.json or {}
        prompt = parse_prompt((body.get("input") or {}).get("messages") or [])
        with self.lock:
            self.prompts.append(prompt)
        text = self.answer(prompt)
        prompt_chars = sum(len(m.get("content", "")) for m in prompt.messages)
        return Reply(json=dashscope_message(text, input_tokens=prompt_chars // 4,
                                            output_tokens=max(1, len(text) // 4)))


def fast_policy(attempts: int = 2) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, base_delay=0.001, max_delay=0.005, max_retry_after=0.01)


def make_settings(tmp_path, **consolidation: Any) -> Settings:
    values = {"worker": "none", "every_messages": 1, "every_seconds": 0.05, "reflect_every_observations": 100,
              "language": "en"}
    values.update(consolidation)
    return Settings(store={"path": tmp_path / "memory.db"}, consolidation=values)


def make_engine(tmp_path, server: FakeModelServer, embedder, *, attempts: int = 2, start_worker: bool | None = None,
                **consolidation: Any) -> MemoryScope:
    llm = OpenAIChatModel("fake-llm", base_url=server.url + "/v1", api_key="sk-test-0123456789",
                          retry_policy=fast_policy(attempts))
    return MemoryScope(make_settings(tmp_path, **consolidation), embedder=embedder, llm=llm,
                       start_worker=start_worker)


def at(day: int, hour: int = 10, month: int = 5) -> datetime:
    return datetime(2026, month, day, hour, 0, tzinfo=timezone.utc)


def user_msg(text: str, when: datetime, name: str = "Anna") -> dict:
    return {"role": "user", "content": text, "name": name, "timestamp": when}


def assistant_msg(text: str, when: datetime) -> dict:
    return {"role": "assistant", "content": text, "timestamp": when}


__all__ = ["Brain", "Prompt", "parse_prompt", "obs", "make_engine", "make_settings", "at", "user_msg",
           "assistant_msg", "fast_policy", "OPENAI_CHAT", "FakeModelServer", "Reply"]
