"""An operator's edit of a procedure: its ``when``, ``do``, ``why`` and ``tools``, checked as learning
checks what the model wrote, where that applies.

The run a procedure was learnt from is not at hand (its messages are in its users' logs, which no
edit reads), so the procedure itself is the ground an edit must stand on:

* ``tools`` may drop tools, never add one: a procedure names only tools its runs called;
* a code-like word (``snake_case``, ``dotted.name``) must be one of its tools or be in its text already,
  a quoted text must be in its text already;
* no prompt markup (``P2``, ``[call 3]``), no e-mail address, no phone-like number;
* each text at most `run.MAX_FIELD_CHARS` characters, ``when`` and ``do`` not blank.

Its provenance stays: ``source_ids``, ``runs``, the outcome counters and its weight are kept; the
time of the edit is kept in ``metadata["edited_at"]``. An expired procedure cannot be edited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..types import Memory, MemoryStatus, utc_now
from ..validation import check_text
from .run import EMAIL, MARKUP, MAX_FIELD_CHARS, MIN_QUOTED, QUOTED, Proposed, code_words, phone_like
from .step import content_of


@dataclass(frozen=True, slots=True)
class Change:
    """The fields an edit sets (None: kept); ``why`` "" removes the reason."""

    when: str | None = None
    do: str | None = None
    why: str | None = None
    tools: tuple[str, ...] | None = None


def check_change(*, when: Any = None, do: Any = None, why: Any = None, tools: Any = None) -> Change:
    """The edit's fields, type-checked and with their whitespace collapsed; `ValidationError` when one
    is not a text (``tools``: a non-empty list of tool names) or when nothing is changed."""
    if when is None and do is None and why is None and tools is None:
        raise ValidationError("nothing to change: give when, do, why or tools")
    checked_tools = None
    if tools is not None:
        if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple)) or not tools \
                or not all(isinstance(t, str) and t for t in tools):
            raise ValidationError("tools must be a non-empty list of tool names")
        checked_tools = tuple(dict.fromkeys(tools))
    return Change(when=_field(when, "when"), do=_field(do, "do"),
                  why=None if why is None else ("" if why == "" else _field(why, "why")), tools=checked_tools)


def _field(value: Any, what: str) -> str | None:
    if value is None:
        return None
    return " ".join(check_text(value, what, MAX_FIELD_CHARS).split())  # never blank: check_text refuses it


def apply(memory: Memory, change: Change) -> None:
    """Edit a stored procedure in place (content rewritten from the fields, provenance kept), or raise
    `ValidationError` naming what the edit may not say (see the module docstring)."""
    if memory.status is not MemoryStatus.ACTIVE:
        raise ValidationError("an expired procedure cannot be edited")
    data = dict(memory.metadata)
    old_tools = [str(t) for t in data.get("tools") or []]
    when = change.when if change.when is not None else str(data.get("when") or "")
    do = change.do if change.do is not None else str(data.get("do") or "")
    why = change.why if change.why is not None else str(data.get("why") or "")
    tools = list(change.tools) if change.tools is not None else old_tools
    reason = refusal(when, do, why, tools, old_tools=old_tools,
                     old_text=" ".join([memory.content, *(str(data.get(k) or "") for k in ("when", "do", "why"))]))
    if reason is not None:
        raise ValidationError(f"the edit {reason}")
    now = utc_now()
    data.update({"when": when, "do": do, "why": why, "tools": sorted(tools), "edited_at": now.isoformat()})
    memory.content = content_of(Proposed(when=when, do=do, why=why, tools=tools), str(data.get("language") or "en"))
    memory.metadata = data
    memory.updated_at = now


def refusal(when: str, do: str, why: str, tools: list[str], *, old_tools: list[str], old_text: str) -> str | None:
    """Why the edited fields may not be stored, or None."""
    joined = " ".join((when, do, why))
    invented = sorted(set(tools) - set(old_tools))
    if invented:
        return "names a tool the procedure's runs never called"
    if MARKUP.search(joined):
        return "holds prompt markup"
    if EMAIL.search(joined) or phone_like(joined):
        return "holds personal data (an e-mail address or a phone number)"
    for word in code_words(joined):
        if word not in old_tools and word not in old_text:
            return "names a tool or argument the procedure does not hold"
    for quoted in (q for text in (when, do, why) for q in QUOTED.findall(text) if len(q) >= MIN_QUOTED):
        if quoted.casefold() not in old_text.casefold():
            return "quotes a text the procedure does not hold"
    return None
