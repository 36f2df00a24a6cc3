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
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.consolidation.extract import opening
from memoryscope_plugins.models.openai_compat import OpenAIChatModel
from memoryscope_plugins.models.retry import RetryPolicy
from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer, Reply, openai_completion

NEW_LINE = re.compile(r"^#(\d+) \[([^\]]*)\] ([^:]+): (.*)$")  # a numbered (user) message of the batch
BETWEEN_LINE = re.compile(r"^   \[([^\]]*)\] ([^:]+): (.*)$")  # an unnumbered (assistant) line of the batch
PAIR_OLD = re.compile(r"^(?:OLD|旧) \[[^\]]*\][:：] ?(.*)$")
PAIR_NEW = re.compile(r"^(?:NEW|新) \[[^\]]*\][:：] ?(.*)$")
OBS_LINE = re.compile(r"^(O\d+) \[[^\]]*\] (.*?)( \(no longer true\)|（已不再成立）)?$")
INS_LINE = re.compile(r"^(I\d+) (.*?)(?: \((?:rests on|依据) ([^)]*)\)|（依据 ([^）]*)）)?$")


@dataclass
class Prompt:
    """The variable part of a prompt the engine sent, parsed back."""

    kind: str  # consolidate | judge | reflect | chat
    system: str
    user: str
    new: list[tuple[int, str, str, str]] = field(default_factory=list)  # (n, stamp, speaker, content)
    between: list[tuple[str, str, str]] = field(default_factory=list)  # unnumbered lines: (stamp, speaker, content)
    pairs: list[tuple[int, str, str]] = field(default_factory=list)  # (1, old, new) of a judge question
    observations: dict[str, str] = field(default_factory=dict)  # O-label -> content
    expired: set[str] = field(default_factory=set)  # O-labels marked no longer true
    insights: dict[str, str] = field(default_factory=dict)  # I-label -> content
    messages: list[dict] = field(default_factory=list)

    @property
    def memories(self) -> dict[str, str]:
        """The existing memories a judge prompt asks about (label "P<n>" -> content)."""
        return {f"P{n}": old for n, old, _ in self.pairs}


def parse_prompt(messages: list[dict]) -> Prompt:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = messages[-1]["content"] if messages else ""
    if '"says"' in system:
        kind = "consolidate"
    elif '"still_true"' in system:
        kind = "judge"
    elif '"insights"' in system:
        kind = "reflect"
    else:
        kind = "chat"
    prompt = Prompt(kind=kind, system=system, user=user, messages=messages)
    # the user message of the first exchange (a re-ask appends more messages)
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    in_batch = False
    for line in first_user.splitlines():
        if line.startswith(("New messages", "新消息")):
            in_batch = True
            continue
        if kind == "consolidate" and in_batch:
            if (match := NEW_LINE.match(line)):
                prompt.new.append((int(match.group(1)), match.group(2), match.group(3), match.group(4)))
            elif (match := BETWEEN_LINE.match(line)):
                prompt.between.append((match.group(1), match.group(2), match.group(3)))
        elif kind == "judge":
            if (match := PAIR_OLD.match(line)):
                prompt.pairs.append((1, match.group(1), ""))
            elif (match := PAIR_NEW.match(line)) and prompt.pairs:
                n, old, _ = prompt.pairs[-1]
                prompt.pairs[-1] = (n, old, match.group(1))
        elif (match := OBS_LINE.match(line)):
            prompt.observations[match.group(1)] = match.group(2)
            if match.group(3):
                prompt.expired.add(match.group(1))
        elif (match := INS_LINE.match(line)):
            prompt.insights[match.group(1)] = match.group(2)
    return prompt


def obs(content: str, messages: list[int], *, about: str = "Anna", kind: str = "fact", reality: str = "real",
        time: str | None = None, date: str | None = None, importance: int = 2, profile: Any = None,
        **ignored: Any) -> dict:
    """One observation the fake model writes, under the numbered message(s) ``messages`` (with a
    ``profile`` value when given: ``{"key": ..., "value": ...}`` or anything a model writes there)."""
    item = {"content": content, "about": about, "kind": kind, "messages": messages, "reality": reality,
            "time": time, "date": date, "importance": importance}
    if profile is not None:
        item["profile"] = profile
    return item


def named(name: Any, message: int, kind: Any = "person", alias_of: Any = None) -> dict:
    """An entity the fake model lists in the ``entities`` of numbered message ``message``."""
    entity = {"name": name, "kind": kind}
    if alias_of is not None:
        entity["alias_of"] = alias_of
    return {"entity": entity, "messages": [message]}


def raw_entities(value: Any, message: int) -> dict:
    """Whatever a model writes as the ``entities`` of numbered message ``message`` (a string, null,
    a dict...): it replaces that entry's list as it is; ``...`` leaves the key out."""
    return {"entities_value": value, "messages": [message]}


def default_extract(prompt: Prompt) -> list[dict]:
    """A small rule-based 'model': one observation per user message, with a few learned phrases."""
    out: list[dict] = []
    for n, _stamp, speaker, content in prompt.new:
        low = content.lower()
        if low.strip(" !.") in ("hi", "hello", "thanks", "thank you", "ok"):
            continue  # small talk
        if "in my novel" in low:
            out.append(obs(f"{speaker} is writing a novel.", [n]))
            out.append(obs(f"In {speaker}'s novel, the narrator is a pilot.", [n], reality="fiction", importance=1))
            continue
        if "started eating fish again" in low:
            out.append(obs(f"{speaker} started eating fish again; {speaker} is no longer vegetarian.", [n],
                           kind="preference"))
            continue
        if "vegetarian" in low:
            out.append(obs(f"{speaker} is vegetarian.", [n], kind="preference"))
            continue
        if "last friday" in low:
            # a deliberately wrong date: the rule-based parser must correct it
            out.append(obs(f"{speaker} ran a half marathon.", [n], kind="event", time="last Friday",
                           date="2026-05-15"))
            continue
        out.append(obs(f"{speaker} said: {content}", [n]))
    return out


CHANGE_WORDS = ("no longer", "started", "quit", "instead", "moved", "stopped", "不再", "开始", "辞职", "戒")


def default_judge(prompt: Prompt) -> list[str]:
    """A good model's verdicts on simple cases: the same words are "same", a stated change of
    something the old memory says is "outdated", anything else "both"."""
    verdicts = []
    for _n, old, new in prompt.pairs:
        old_core, new_core = old.lower().rstrip("."), new.lower().rstrip(".")
        if old_core in new_core and not any(w in new_core for w in CHANGE_WORDS):
            verdicts.append("same")
        elif any(w in new_core for w in CHANGE_WORDS) and _shares_topic(old_core, new_core):
            verdicts.append("outdated")
        else:
            verdicts.append("both")
    return verdicts


def _shares_topic(old: str, new: str) -> bool:
    words = {w.strip(".,;") for w in old.split() if len(w) > 3}
    return any(w in new for w in words)


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
        insights.append({"subject": "Life of Anna", "value": "; ".join(prompt.observations[label] for label in others),
                         "sources": others, "update": existing, "merge": []})
    return insights


class Brain:
    """The fake model's behaviour. Replace `extract` / `judge` / `reflect` / `reply` per test.

    `extract` returns observations with the numbers of the messages they come from (`obs`), or a
    raw answer string; the Brain groups them into one entry per numbered message, as the prompt
    asks. `judge` gets one question (``prompt.pairs == [(1, old, new)]``) and returns
    ``["outdated"]`` (answered ``{"still_true": false}``), any other verdict (true), or a raw string.
    """

    def __init__(self) -> None:
        self.extract: Callable[[Prompt], list[dict] | str] = default_extract
        self.judge: Callable[[Prompt], list[str] | str] = default_judge
        self.reflect: Callable[[Prompt], list[dict] | str] = default_reflect
        self.reply: Callable[[Prompt], str] = lambda prompt: "Noted!"
        self.prompts: list[Prompt] = []
        self.lock = threading.Lock()

    def kinds(self) -> list[str]:
        with self.lock:
            return [p.kind for p in self.prompts]

    def of_kind(self, kind: str) -> list[Prompt]:
        with self.lock:
            return [p for p in self.prompts if p.kind == kind]

    def answer(self, prompt: Prompt) -> str:
        if prompt.kind == "consolidate":
            value = self.extract(prompt)
            return value if isinstance(value, str) else json.dumps(entries(prompt, value), ensure_ascii=False)
        if prompt.kind == "judge":
            verdicts = self.judge(prompt)
            if isinstance(verdicts, str):
                return verdicts
            return json.dumps({"still_true": verdicts[0] != "outdated"})
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
            from tests.support.fakes.fake_model_server import openai_chunks
            pieces = [text[i:i + 5] for i in range(0, len(text), 5)] or [""]
            return Reply(sse=openai_chunks(pieces, body.get("model") or "fake"))
        return Reply(json=openai_completion(text, body.get("model") or "fake", prompt_tokens=prompt_chars // 4,
                                            completion_tokens=max(1, len(text) // 4)))

    def dashscope(self, server: FakeModelServer, request: Any) -> Reply:
        """The same behaviour behind the DashScope-native generation route."""
        from tests.support.fakes.fake_model_server import dashscope_message
        body = request.json or {}
        prompt = parse_prompt((body.get("input") or {}).get("messages") or [])
        with self.lock:
            self.prompts.append(prompt)
        text = self.answer(prompt)
        prompt_chars = sum(len(m.get("content", "")) for m in prompt.messages)
        return Reply(json=dashscope_message(text, input_tokens=prompt_chars // 4,
                                            output_tokens=max(1, len(text) // 4)))


def entries(prompt: Prompt, items: list[Any]) -> dict:
    """Observations (each naming its message numbers) as the answer shape: one entry per numbered
    message, in order, with its opening words; `named` entities go to their entry's ``entities``
    (`raw_entities` replaces that list with any value)."""
    grouped: dict[int, list[dict]] = {n: [] for n, *_ in prompt.new}
    named_by: dict[int, Any] = {n: [] for n in grouped}
    for item in items:
        if isinstance(item, dict) and ("entity" in item or "entities_value" in item):
            number = item["messages"][0]
            if number in named_by:
                if "entity" in item and isinstance(named_by[number], list):
                    named_by[number].append(item["entity"])
                else:
                    named_by[number] = item.get("entities_value")
            continue
        if not isinstance(item, dict) or "messages" not in item:
            for n in list(grouped)[:1]:
                grouped[n].append(item)  # junk goes to the first message, for tests of junk
            continue
        numbers = item.get("messages") or []
        numbers = numbers if isinstance(numbers, list) else [numbers]
        target = next((int(str(m).strip("[]#")) for m in numbers if str(m).strip("[]#").isdigit()
                       and int(str(m).strip("[]#")) in grouped), None)
        if target is not None:
            grouped[target].append({k: v for k, v in item.items() if k != "messages"})
    language = "zh" if re.search(r"[\u4e00-\u9fff]", prompt.system[:40]) else "en"
    answer = [{"n": n, "says": opening(content, language), "observations": grouped[n], "entities": named_by[n]}
              for n, _stamp, _speaker, content in prompt.new]
    return {"messages": [{k: v for k, v in entry.items() if v is not ...} for entry in answer]}


def wait_for(condition: Callable[[], bool], timeout: float = 15.0, interval: float = 0.02) -> bool:
    """Poll `condition` until it holds or `timeout` seconds have passed; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


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


__all__ = ["Brain", "Prompt", "parse_prompt", "obs", "named", "raw_entities", "entries", "make_engine",
           "make_settings", "at", "user_msg",
           "assistant_msg", "fast_policy", "wait_for", "OPENAI_CHAT", "FakeModelServer", "Reply"]
