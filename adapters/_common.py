"""What every framework adapter shares: the options, the fail-safe engine calls, text helpers.

An adapter maps one framework turn onto two engine calls: `retrieve` before the model answers
(the result is rendered into a memory block injected into that model call only) and `record`
after it (the user message and the final answer). Both go through `MemoryBridge`, which turns a
failing memory backend into "no memories" plus a logged warning (``on_error="warn"``, the
default) so the agent still answers. Log lines carry ids, counts and exception types, never
memory or message content.

This module imports no agent framework.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.log_hygiene import user_ref
from memoryscope_plugins.procedures.scope import MAX_USED
from memoryscope_plugins.retrieval.injection import (
    DEFAULT_TEMPLATE,
    check_template,
    is_block,
    render_block,
    result_block,
)
from memoryscope_plugins.types import MemoryType, RetrievalResult
from memoryscope_plugins.validation import check_min_relevance, check_top_k

from . import _team_keys as team_keys
from ._outcome import Outcome, procedure_ids, turn_outcome
from ._tool_capture import CallSeen, ResultSeen, tool_messages, unanswered

log = logging.getLogger("memoryscope_plugins.adapters")

OnError = Literal["warn", "raise"]
#: A user or agent id: a fixed string, or a callable the adapter calls with framework objects
#: (the sender agent, the runtime...) and which returns the id, or None when it cannot tell.
IdSource = str | Callable[..., str | None] | None


@dataclass
class MemoryConfig:
    """Options shared by every adapter.

    Attributes:
        user_id: whose memories are read and written: a string, or a callable receiving
            framework-specific arguments (documented per adapter) and returning the id.
        agent_id: the assistant persona recorded with each memory; defaults to the agent's name
            where the framework has one, else ``"assistant"``.
        top_k: memories injected per model call; None keeps the engine's setting.
        types: only these memory types (``turn``, ``observation``, ``insight``, ``custom``).
        template: the memory block; must contain ``{context}``.
        scope_to_agent: retrieve only memories recorded by this agent_id (default: every
            memory of the user, whichever agent recorded it).
        session_id: recorded with each message; default: one new id per adapter instance.
        on_error: ``"warn"`` degrades a failing memory backend to "no memories" with a logged
            warning; ``"raise"`` lets the error through.
        min_relevance: relevance floor for injected memories (None keeps the engine's
            ``retrieval.min_relevance``): see `MemoryScope.retrieve`; -1 turns it off.
        human_names: speaker names that are the human in multi-agent chats (besides the
            framework's own default for the human, e.g. "user"); every other speaker's words
            are recorded as that speaker's, never as the user's.
    """

    user_id: IdSource = None
    agent_id: IdSource = None
    top_k: int | None = None
    types: Sequence[MemoryType | str] | None = None
    template: str = DEFAULT_TEMPLATE
    scope_to_agent: bool = False
    session_id: str | None = None
    on_error: OnError = "warn"
    record: bool = True
    retrieve: bool = True
    min_relevance: float | None = None
    human_names: Sequence[str] = ()
    _session: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.top_k is not None:
            check_top_k(self.top_k)
        if self.on_error not in ("warn", "raise"):
            raise ValueError("on_error must be 'warn' or 'raise'")
        check_template(self.template)
        if self.types is not None:
            self.types = tuple(MemoryType(t).value for t in self.types)
        for name in ("user_id", "agent_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str) and not callable(value):
                raise TypeError(f"{name} must be a string, a callable or None")
            if isinstance(value, str) and not value.strip():
                raise ValueError(f"{name} must not be empty")
        if self.min_relevance is not None:
            check_min_relevance(self.min_relevance)
        if isinstance(self.human_names, str) or not all(isinstance(n, str) for n in self.human_names):
            raise TypeError("human_names must be a list of names")
        self.human_names = tuple(self.human_names)
        self._session = self.session_id or uuid.uuid4().hex

    @property
    def session(self) -> str:
        """The session id recorded with messages (given, or one per adapter instance)."""
        return self._session

    def resolve_user(self, *args: Any) -> str | None:
        """The user id for this turn (None when it cannot be resolved: memory is skipped)."""
        return _resolve(self.user_id, args)

    def resolve_agent(self, *args: Any, default: str | None = None) -> str:
        """The agent id for this turn: the configured one, else `default`, else "assistant"."""
        return _resolve(self.agent_id, args) or default or "assistant"

    def render(self, context: str) -> str:
        """The memory block for a retrieved context; "" when nothing was found."""
        return render_block(context, self.template)

    def is_block(self, text: Any) -> bool:
        """Whether `text` is a memory block rendered with this template."""
        return is_block(text, self.template)


def _resolve(source: IdSource, args: tuple[Any, ...]) -> str | None:
    if source is None:
        return None
    if isinstance(source, str):
        return source
    value = source(*args)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError("an id callable must return a non-empty string or None")
    return value


def empty_result(query: str = "") -> RetrievalResult:
    """A retrieval result with no memories (what a failed retrieval degrades to)."""
    return RetrievalResult(query=query, memories=[], context="")


#: `MemoryBridge.record`'s engine arguments and the team keys they claim.
Prepared = tuple[dict[str, Any], team_keys.Claim]


class MemoryBridge:
    """The engine calls an adapter makes, made safe.

    ``retrieve`` never raises with ``on_error="warn"``: a failure is logged (exception type only)
    and gives an empty result. ``record`` likewise logs and returns ``[]``. Empty messages are
    dropped, and messages longer than the engine accepts are skipped with a warning instead of
    failing the whole turn.
    """

    def __init__(self, memory: MemoryScope, config: MemoryConfig, framework: str) -> None:
        if not isinstance(memory, MemoryScope):
            raise TypeError(f"memory must be a MemoryScope, not {type(memory).__name__}")
        self.memory = memory
        self.config = config
        self.framework = framework

    # -- retrieval ----------------------------------------------------------------------------
    def _retrieve_args(self, query: str, agent_id: str | None, top_k: int | None,
                       min_relevance: float | None) -> dict[str, Any] | None:
        query = query.strip()
        if not query:
            return None
        limit = self.memory.settings.max_content_chars
        # the agent's procedures are those of the agent the turn's run is recorded under, whether or
        # not the user's memories are filtered by it (scope_to_agent)
        return {"query": query[-limit:], "agent_id": agent_id if self.config.scope_to_agent else None,
                "procedures_of": agent_id,
                "top_k": top_k if top_k is not None else self.config.top_k, "types": self.config.types,
                "min_relevance": min_relevance if min_relevance is not None else self.config.min_relevance}

    def retrieve(self, user_id: str | None, query: str | None, *, agent_id: str | None = None,
                 top_k: int | None = None, min_relevance: float | None = None) -> RetrievalResult:
        """Memories of `user_id` relevant to `query` (empty when there is no user, query or store).

        `agent_id` is the agent the turn is recorded under: with ``procedures.enabled`` its procedures
        are returned (whatever ``scope_to_agent`` says), and with ``scope_to_agent`` only the memories
        it recorded. `top_k` and `min_relevance` override the config's for this call (None keeps it; a
        `min_relevance` of -1 turns the floor off)."""
        if not self.config.retrieve or not user_id or not query:
            return empty_result(query or "")
        kwargs = self._retrieve_args(query, agent_id, top_k, min_relevance)
        if kwargs is None:
            return empty_result(query)
        try:
            return self.memory.retrieve(user_id, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self.report_failure("retrieval", user_id, exc)
            return empty_result(query)

    async def aretrieve(self, user_id: str | None, query: str | None, *, agent_id: str | None = None,
                        top_k: int | None = None, min_relevance: float | None = None) -> RetrievalResult:
        """Async twin of `retrieve`."""
        if not self.config.retrieve or not user_id or not query:
            return empty_result(query or "")
        kwargs = self._retrieve_args(query, agent_id, top_k, min_relevance)
        if kwargs is None:
            return empty_result(query)
        try:
            return await self.memory.aretrieve(user_id, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self.report_failure("retrieval", user_id, exc)
            return empty_result(query)

    def block(self, result: RetrievalResult) -> str:
        """The memory block to inject for a retrieval result ("" when empty)."""
        return result_block(result, self.config.template)

    # -- recording ------------------------------------------------------------------------------
    def _clean(self, messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        limit = self.memory.settings.max_content_chars
        kept = []
        for message in messages:
            if message.get("tool_call") is not None:  # made safe by _tool_capture.tool_message
                kept.append({k: v for k, v in message.items() if v is not None})
                continue
            content = message.get("content")
            if not isinstance(content, str) or not content.strip():
                continue
            if len(content) > limit:
                log.warning("%s: a %s message of %d characters exceeds the engine's limit (%d); not recorded",
                            self.framework, message.get("role", "?"), len(content), limit)
                continue
            kept.append({k: v for k, v in message.items() if v is not None})
        return kept

    def record(self, user_id: str | None, messages: Iterable[Mapping[str, Any]], *, agent_id: str,
               session_id: str | None = None, run_outcome: Outcome | None = None,
               procedures_used: Sequence[str] = ()) -> list[str]:
        """Record a turn's messages (dicts with role, content, optional name and `_team_keys.KEY`,
        or a tool call's message from `_tool_capture.tool_messages`); returns the ids.

        A message with a key another member of the team recorded already for this user is left
        out (`_team_keys`; one that member is recording at this moment is waited for).
        `run_outcome` ends the agent's run with this turn (`_outcome`), `procedures_used` are the
        procedures the turn's retrieval returned: both only matter with ``procedures.enabled``."""
        rows = list(messages)
        prepared = self._record_args(user_id, rows, agent_id, session_id, run_outcome, procedures_used)
        if prepared is not None and prepared[1].waiting:
            prepared = self._settled(user_id, rows, agent_id, session_id, run_outcome, procedures_used, prepared)
        if prepared is None or user_id is None:
            return []
        args, claim = prepared
        try:
            ids = self.memory.record(user_id, args.pop("messages"), **args)
        except Exception as exc:  # noqa: BLE001
            claim.finish(recorded=False)
            self.report_failure("recording", user_id, exc)
            return []
        claim.finish(recorded=True)
        return ids

    async def arecord(self, user_id: str | None, messages: Iterable[Mapping[str, Any]], *, agent_id: str,
                      session_id: str | None = None, run_outcome: Outcome | None = None,
                      procedures_used: Sequence[str] = ()) -> list[str]:
        """Async twin of `record` (it waits for another member's recording off the event loop)."""
        rows = list(messages)
        prepared = self._record_args(user_id, rows, agent_id, session_id, run_outcome, procedures_used)
        if prepared is not None and prepared[1].waiting:  # the wait blocks: off the event loop
            prepared = await asyncio.to_thread(self._settled, user_id, rows, agent_id, session_id, run_outcome,
                                               procedures_used, prepared)
        if prepared is None or user_id is None:
            return []
        args, claim = prepared
        try:
            ids = await self.memory.arecord(user_id, args.pop("messages"), **args)
        except Exception as exc:  # noqa: BLE001
            claim.finish(recorded=False)
            self.report_failure("recording", user_id, exc)
            return []
        claim.finish(recorded=True)
        return ids

    def _settled(self, user_id: str | None, rows: list[Mapping[str, Any]], agent_id: str, session_id: str | None,
                 run_outcome: Outcome | None, procedures_used: Sequence[str],
                 prepared: Prepared | None) -> Prepared | None:
        """`_record_args` again once the other members' recordings it met are over (blocks: up to
        `_team_keys.WAIT_S`, then the messages still under way are taken too). Holds no key while it
        waits, so two members never wait for each other."""
        deadline = time.monotonic() + team_keys.WAIT_S
        while prepared is not None and prepared[1].waiting:
            prepared[1].finish(recorded=False)
            settled = prepared[1].wait(deadline - time.monotonic())
            prepared = self._record_args(user_id, rows, agent_id, session_id, run_outcome, procedures_used,
                                         force=not settled)
        return prepared

    def _record_args(self, user_id: str | None, messages: Iterable[Mapping[str, Any]], agent_id: str,
                     session_id: str | None, run_outcome: Outcome | None, procedures_used: Sequence[str], *,
                     force: bool = False) -> Prepared | None:
        """`record`'s arguments and the team keys they claim (`_team_keys.unrecorded`; `force`: also
        the messages another member is still recording), or None when there is nothing to record."""
        if not self.config.record or not user_id:
            return None
        cleaned = self._clean(messages)
        if not cleaned:
            return None
        scope = agent_id if self.config.scope_to_agent else None
        kept, claim = team_keys.unrecorded(self.memory, user_id, scope, cleaned, force=force)
        if not kept and not claim.waiting:
            return None  # every message is recorded already, by another member of the team
        used = list(procedures_used)[:MAX_USED] if run_outcome is not None else []
        return {"messages": kept, "agent_id": agent_id, "session_id": session_id or self.config.session,
                "run_outcome": run_outcome, "procedures_used": used or None}, claim

    def record_failed(self, user_id: str | None, tools: Sequence[Mapping[str, Any]], *, agent_id: str,
                      session_id: str | None = None, procedures_used: Sequence[str] = ()) -> list[str]:
        """End the run of a turn the framework raised out of: its tool calls seen so far are
        recorded with ``run_outcome="failed"`` (nothing when it made none; never the user's words
        nor a reply: the turn gave none). Never raises (the framework's exception goes on)."""
        if not tools:
            return []
        try:
            return self.record(user_id, tools, agent_id=agent_id, session_id=session_id, run_outcome="failed",
                               procedures_used=procedures_used)
        except Exception:  # noqa: BLE001 - on_error="raise": the framework's own exception matters more
            log.warning("%s: recording a failed turn failed too", self.framework)
            return []

    async def arecord_failed(self, user_id: str | None, tools: Sequence[Mapping[str, Any]], *, agent_id: str,
                             session_id: str | None = None, procedures_used: Sequence[str] = ()) -> list[str]:
        """Async twin of `record_failed`."""
        if not tools:
            return []
        try:
            return await self.arecord(user_id, tools, agent_id=agent_id, session_id=session_id,
                                      run_outcome="failed", procedures_used=procedures_used)
        except Exception:  # noqa: BLE001 - on_error="raise": the framework's own exception matters more
            log.warning("%s: recording a failed turn failed too", self.framework)
            return []

    def tool_messages(self, calls: Iterable[CallSeen], results: Iterable[ResultSeen],
                      durations: Mapping[str, float] | None = None, *,
                      keep_unanswered: bool = False) -> list[dict[str, Any]]:
        """The messages recording a turn's tool calls with their results (`_tool_capture`), each
        one the engine accepts; a call with no result is left out (counted in the debug log), or,
        with `keep_unanswered` (a turn that raised), recorded with status ``unknown``."""
        calls = list(calls)
        messages = tool_messages(calls, results, max_chars=self.memory.settings.max_content_chars,
                                 durations=durations, keep_unanswered=keep_unanswered)
        if len(messages) < len(calls):
            log.debug("%s: %d tool call(s) without a result are not recorded", self.framework,
                      unanswered(calls, messages))
        return messages

    def report_failure(self, what: str, user_id: str, exc: Exception) -> None:
        """Log a memory failure (exception type only) or re-raise it with ``on_error="raise"``."""
        if self.config.on_error == "raise":
            raise exc
        log.warning("%s: memory %s failed for user %s (%s); the agent continues without it",
                    self.framework, what, user_ref(user_id), type(exc).__name__)


# -- text helpers -------------------------------------------------------------------------------

def text_of(content: Any) -> str:
    """The plain text of a message content: a string, or the text parts of a multimodal list
    (OpenAI ``{"type": "text", "text": ...}`` dicts, LangChain content blocks, objects with a
    ``text`` attribute). Images, tool calls and other parts are ignored."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        if content.get("type", "text") == "text" and isinstance(content.get("text"), str):
            return content["text"]
        if isinstance(content.get("content"), (str, list)):
            return text_of(content["content"])
        return ""
    if isinstance(content, (list, tuple)):
        parts = [text_of(part) for part in content]
        return "\n".join(part for part in parts if part)
    text = getattr(content, "text", None)
    return text if isinstance(text, str) else ""


class Line(NamedTuple):
    """One chat message as every adapter sees it, whatever its framework's message type.

    Attributes:
        role: ``"user"`` for a message the framework gives as the user's (each adapter maps its
            own message types onto it), anything else for the others.
        name: who sent it, when the framework says.
        content: its plain text ("" for none).
    """

    role: str
    name: str | None
    content: str


def holds_users_words(line: Line, humans: Collection[str] | None = None) -> bool:
    """Whether `line` holds the user's words (see `latest_user_index`)."""
    return line.role == "user" and (humans is None or line.name in humans) and bool(line.content.strip())


def latest_user_index(lines: Sequence[Line], humans: Collection[str] | None = None) -> int | None:
    """The position of the newest line with the user's words (None when there is none).

    A line holds the user's words when its role is ``"user"``, its text is not blank and, when
    `humans` is given (a group chat), its sender is one of them: there, another agent's
    message is never the user's."""
    return next((i for i in range(len(lines) - 1, -1, -1) if holds_users_words(lines[i], humans)), None)


def latest_user_text(lines: Sequence[Line], humans: Collection[str] | None = None, *,
                     whole_input: bool = False) -> str:
    """The user's latest words among `lines` (oldest first): the text of the newest line that
    holds them (see `latest_user_index`), "" when there is none.

    With `whole_input`, `lines` are one input together (the messages handed to one reply):
    the text of every line holding the user's words, oldest first, one per line."""
    if whole_input:
        return "\n".join(line.content for line in lines if holds_users_words(line, humans))
    index = latest_user_index(lines, humans)
    return "" if index is None else lines[index].content


def turn(user_text: str | None, reply_text: str | None, *, user_name: str | None = None,
         agent_name: str | None = None, tools: Sequence[Mapping[str, Any]] = (), user_key: str | None = None,
         reply_key: str | None = None) -> list[dict[str, Any]]:
    """The messages to record for one exchange (empty sides left out), with the agent's tool
    calls of the exchange (`MemoryBridge.tool_messages`) between the request and the answer.
    `user_key` and `reply_key`: the framework's identity of each message in a team (`_team_keys`)."""
    messages: list[dict[str, Any]] = []
    if user_text and user_text.strip():
        messages.append({"role": "user", "content": user_text, "name": user_name, team_keys.KEY: user_key})
    messages.extend(dict(message) for message in tools)
    if reply_text and reply_text.strip():
        messages.append({"role": "assistant", "content": reply_text, "name": agent_name, team_keys.KEY: reply_key})
    return messages


__all__ = ["DEFAULT_TEMPLATE", "CallSeen", "IdSource", "Line", "MemoryBridge", "MemoryConfig", "OnError", "Outcome",
           "ResultSeen", "empty_result", "holds_users_words", "latest_user_index", "latest_user_text", "log",
           "procedure_ids", "text_of", "turn", "turn_outcome"]
