"""A finished run as the procedure prompt shows it, and what a procedure the model wrote may say.

The prompt sees the run only: the user's and the agent's words, each tool call with its arguments
and its result or error, and the outcome. A procedure is refused (reported, never stored) when:

* it holds prompt markup (``P2``, ``[call 3]``, ``$placeholders``);
* a field of it is cut off: its brackets do not close (``"do": "resize_image {"``, a small model's
  call written half);
* it names a tool the run never called, or cites a call the run does not hold;
* it copies personal data of the run: an e-mail address, a phone-like number, a number of four
  digits or more a user wrote (an amount, coordinates; not a date or a time), or one of the run's
  personal names (`personal`: the user's id, the speakers' names, the names the messages write by
  the record-time rules, the values of person arguments);
* it holds a code-like word (``snake_case``, ``dotted.name``) that is neither a called tool, nor an
  argument name of a call, nor in the run's text; or a quoted text the run does not hold;
* it tells the agent to repeat a failed call (`failures`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..storage.base import StoredMessage
from .failures import repeats_failure
from .personal import copied_name, run_names

MAX_SHOWN_OUTPUT = 300  # characters of a call's result or error shown in the prompt
MAX_SHOWN_TEXT = 1_000  # characters of a message shown in the prompt (a run is read for its lessons, not its text)
MAX_FIELD_CHARS = 400
MARKUP = re.compile(r"(?<![A-Za-z0-9])P\d{1,2}(?![A-Za-z0-9])|\[call \d+\]|\[调用 \d+\]|\$[a-z_]+")
CODE_WORD = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+(?![\w])")
_ABBREVIATION = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")  # "e.g", "i.e", "a.m", "U.S": no code


def code_words(text: str) -> list[str]:
    """The code-like words of `text` (``snake_case``, ``dotted.name``), abbreviations ("e.g.") left out."""
    return [word for word in CODE_WORD.findall(text) if not _ABBREVIATION.fullmatch(word)]
# a quote: an ASCII quote mark that is no apostrophe (not after a letter or digit: "what's", "Rosa's"),
# or a typographic one, up to the first closing mark that is none either (a quote may hold a quote);
# one of fewer than 3 characters (“周五”) is too short to check, never the start of a longer one
QUOTED = re.compile(r"(?:(?<![A-Za-z0-9])[\"']|[“‘「])(.{1,80}?)(?:[\"'](?![A-Za-z0-9])|[”’」])")
MIN_QUOTED = 3
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
PHONE = re.compile(r"\+?\d[\d ()-]{6,}\d")
_DATE_OR_TIME = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?")


_CLOSING = {")": "(", "]": "[", "}": "{"}


def brackets_close(text: str) -> bool:
    """Whether every ASCII bracket of `text` opened is closed, in order (outside quotes too: a cut-off
    call leaves one open)."""
    opened: list[str] = []
    for char in text:
        if char in "([{":
            opened.append(char)
        elif char in _CLOSING:
            if not opened or opened.pop() != _CLOSING[char]:
                return False
    return not opened


def phone_like(text: str) -> bool:
    """Whether `text` holds a phone-like number (an ISO date or a time is none: 2026-05-08 19:00)."""
    return PHONE.search(_DATE_OR_TIME.sub(" ", text)) is not None


MIN_PRIVATE_DIGITS = 4  # a number the user wrote with this many digits or more is theirs (an amount, a place)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")  # "116.3975,39.9087": two numbers


def users_numbers(run: Run) -> set[str]:
    """The numbers the run's users wrote with `MIN_PRIVATE_DIGITS` digits or more (a rent of 3500, an
    office at 39.9087, 116.3975), dates and times left out: what a procedure must not copy."""
    numbers: set[str] = set()
    for stored in run.messages:
        if stored.message.role == "user" and stored.message.tool_call is None:
            text = _DATE_OR_TIME.sub(" ", stored.message.content)
            numbers |= {n for n in _NUMBER.findall(text) if sum(c.isdigit() for c in n) >= MIN_PRIVATE_DIGITS}
    return numbers


def copies_users_number(text: str, run: Run) -> bool:
    """Whether `text` holds one of `users_numbers` (as a whole number, dates and times left out)."""
    mine = users_numbers(run)
    return bool(mine) and any(n in mine for n in _NUMBER.findall(_DATE_OR_TIME.sub(" ", text)))


@dataclass(slots=True)
class Run:
    """The run's messages (oldest first) and its tool calls (numbered from 1 in the prompt)."""

    messages: list[StoredMessage]
    outcome: str

    @property
    def calls(self) -> list[StoredMessage]:
        return [m for m in self.messages if m.message.tool_call is not None]

    def tool_names(self) -> set[str]:
        return {m.message.tool_call.name for m in self.calls if m.message.tool_call is not None}

    def text(self) -> str:
        """Everything the run holds, as one text (for the grounding checks)."""
        parts = []
        for stored in self.messages:
            parts.append(stored.message.content)
            call = stored.message.tool_call
            if call is not None:
                parts.append(json.dumps(call.arguments, ensure_ascii=False))
        return "\n".join(parts)


def render_run(run: Run) -> str:
    """The run's lines: ``[user] ...``, ``[assistant] ...``, ``[call N] tool {args} -> ok: ...``."""
    lines = []
    number = 0
    for stored in run.messages:
        call = stored.message.tool_call
        if call is None:
            text = stored.message.content
            if len(text) > MAX_SHOWN_TEXT:
                text = text[:MAX_SHOWN_TEXT] + "..."
            lines.append(f"[{stored.message.role}] {text}")
            continue
        number += 1
        output = (call.error if call.status == "error" else call.result) or ""
        if len(output) > MAX_SHOWN_OUTPUT:
            output = output[:MAX_SHOWN_OUTPUT] + "..."
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        lines.append(f"[call {number}] {call.name} {arguments} -> {call.status}: {output}")
    return "\n".join(lines)


@dataclass(slots=True)
class Proposed:
    """One procedure the model proposed for a run."""

    when: str
    do: str
    why: str = ""
    tools: list[str] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)  # 1-based call numbers of the run
    same_as: str | None = None  # "P1": an existing procedure it repeats
    replaces: str | None = None  # "P2": an existing procedure it makes wrong


class AnswerError(ValueError):
    """The model's answer is JSON but not in the shape the prompt asked for."""


def parse_answer(value: Any) -> list[Proposed]:
    """The proposals of an answer ``{"procedures": [...]}``; malformed entries are dropped.

    Raises:
        AnswerError: the answer has no ``procedures`` list (it does not account for the run).
    """
    if not isinstance(value, dict) or not isinstance(value.get("procedures"), list):
        raise AnswerError("the answer has no 'procedures' list")
    out: list[Proposed] = []
    for raw in value["procedures"]:
        if not isinstance(raw, dict):
            continue
        when, do = _text(raw.get("when")), _text(raw.get("do"))
        if when is None or do is None:
            continue
        tools = [t for t in raw.get("tools") or [] if isinstance(t, str)] if isinstance(raw.get("tools"), list) else []
        calls = [c for c in raw.get("calls") or [] if isinstance(c, int) and not isinstance(c, bool)] \
            if isinstance(raw.get("calls"), list) else []
        out.append(Proposed(when=when, do=do, why=_text(raw.get("why")) or "", tools=tools, calls=calls,
                            same_as=_text(raw.get("same_as")), replaces=_text(raw.get("replaces"))))
    return out


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text if text and text.lower() not in ("null", "none", "n/a") else None


def refusal(proposed: Proposed, run: Run, private: Sequence[str]) -> str | None:
    """Why a proposal must be refused (see the module docstring), or None when it may be stored.

    ``private`` are the run's personal words: the user's id and the names its people go by."""
    texts = (proposed.when, proposed.do, proposed.why)
    joined = " ".join(texts)
    if any(len(t) > MAX_FIELD_CHARS for t in texts):
        return "too long"
    if MARKUP.search(joined):
        return "prompt markup"
    if any(not brackets_close(t) for t in texts):
        return "is cut off"
    called = run.tool_names()
    if any(tool not in called for tool in proposed.tools):
        return "names a tool the run never called"
    if any(not 1 <= n <= len(run.calls) for n in proposed.calls):
        return "cites a call the run does not hold"
    if not proposed.tools and not proposed.calls:
        return "rests on no call of the run"
    if EMAIL.search(joined) or phone_like(joined) or copies_users_number(joined, run) \
            or copied_name(joined, run, run_names(run, private)):
        return "copies personal data"
    source = run.text()
    arguments = {key for m in run.calls if m.message.tool_call is not None for key in m.message.tool_call.arguments}
    for word in code_words(joined):
        if word not in called and word not in arguments and word not in source:
            return "names a tool or argument the run does not hold"
    quotes = [quoted for text in texts for quoted in QUOTED.findall(text) if len(quoted) >= MIN_QUOTED]
    for quoted in quotes:
        if quoted.casefold() not in source.casefold():
            return "quotes a text the run does not hold"
    if repeats_failure(proposed, run):
        return "repeats a failed call"
    return None


def private_words(run: Run) -> list[str]:
    """The run's personal words: its user's id and the names of the people who spoke."""
    names = {run.messages[0].user_id} if run.messages else set()
    names |= {m.message.name for m in run.messages if m.message.name and m.message.role == "user"}
    return sorted(n for n in names if n)
