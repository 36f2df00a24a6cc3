"""Chat with memory: retrieve -> system prompt with the memories -> LLM -> record the turn.

    turn = chat_with_memory(memory, "anna", "What should I cook tonight?")
    print(turn.answer)            # the model's reply
    turn.memories                 # the ScoredMemory list put in the prompt

Retrieval calls no LLM; the only model call is the reply itself. The user message and the
answer are recorded afterwards (durably; consolidation runs in the background), so the next
turn can recall them. ``history`` carries the short-term conversation of the current session
(earlier messages as ``{"role", "content"}`` dicts), which is sent to the model as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Mapping, Sequence

from .consolidation.prompts import load_prompt
from .consolidation.report import ConsolidationReport
from .errors import ConfigError, ValidationError
from .models.base import ChatResult
from .timeparse import detect_language, format_memory_time
from .types import RetrievalResult, ScoredMemory, as_aware, utc_now

if TYPE_CHECKING:
    from .engine import MemoryScope

NO_MODEL = ("replies need a model: set llm.provider ('openai' or 'dashscope') and llm.model in the settings "
            "(or pass llm= to MemoryScope); recording and retrieval work without one")


@dataclass(slots=True)
class ChatTurn:
    """One answered turn: the reply, the memories it was given, and (when asked) what
    consolidation did with the turn."""

    answer: str
    memories: list[ScoredMemory] = field(default_factory=list)
    consolidation: ConsolidationReport | None = None
    context: str = ""  # the memory block put into the system prompt
    truncated: bool = False  # the reply stopped at the token cap (recorded with metadata truncated=True)


@dataclass(slots=True)
class _Prepared:
    messages: list[dict[str, str]]
    retrieval: RetrievalResult
    moment: datetime
    explicit_time: bool


def _check_model(engine: "MemoryScope") -> None:
    if engine.llm is None:
        raise ConfigError(NO_MODEL)


def _history(history: Sequence[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    if history is None:
        return []
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ValidationError("history must be a list of {'role', 'content'} mappings")
    out = []
    for index, item in enumerate(history):
        if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant", "system") \
                or not isinstance(item.get("content"), str):
            raise ValidationError(f"history item {index} must be a {{'role', 'content'}} mapping")
        out.append({"role": str(item["role"]), "content": item["content"]})
    return out


def build_system_prompt(engine: "MemoryScope", retrieval: RetrievalResult, moment: datetime, language: str,
                        system_prompt: str | None = None) -> str:
    """The system prompt of a reply: the given one (or the packaged default of ``language``)
    followed by the memory block."""
    prompt = load_prompt("chat", language if language in ("en", "zh") else "en",
                         engine.settings.consolidation.prompts_dir)
    today = format_memory_time(moment, prompt.language)
    head = system_prompt.strip() if system_prompt else prompt.system.strip().replace("$today", today)
    memories = retrieval.context or prompt.text("no_memories", "")
    parts = [head, prompt.instructions.strip(), prompt.user_message(memories=memories)]
    return "\n\n".join(p for p in parts if p)


def _prepare(engine: "MemoryScope", user_id: str, message: str, agent_id: str, system_prompt: str | None,
             top_k: int | None, now: datetime | str | None,
             history: Sequence[Mapping[str, Any]] | None) -> _Prepared:
    _check_model(engine)
    if not isinstance(message, str) or not message.strip():
        raise ValidationError("message must be a non-empty string")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ValidationError("system_prompt must be a string")
    moment = _moment(now)
    earlier = _history(history)  # checked before anything runs
    retrieval = engine.retrieve(user_id, message, top_k=top_k, now=moment, procedures_of=agent_id)
    language = engine.settings.language if engine.settings.language != "auto" else detect_language(message)
    system = build_system_prompt(engine, retrieval, moment, language, system_prompt)
    messages = [{"role": "system", "content": system}, *earlier, {"role": "user", "content": message}]
    return _Prepared(messages=messages, retrieval=retrieval, moment=moment, explicit_time=now is not None)


def _moment(now: datetime | str | None) -> datetime:
    if now is None:
        return utc_now()
    if isinstance(now, datetime):
        return as_aware(now)
    if isinstance(now, str):
        try:
            return as_aware(datetime.fromisoformat(now.strip().replace("Z", "+00:00")))
        except ValueError:
            raise ValidationError(f"now must be an ISO 8601 time, got {now!r}") from None
    raise ValidationError("now must be a datetime or an ISO 8601 string")


def _turn_messages(prepared: _Prepared, message: str, answer: str, user_name: str | None,
                   finish_reason: str | None = None) -> list[dict[str, Any]]:
    user_time = prepared.moment
    answer_time = prepared.moment if prepared.explicit_time else utc_now()
    said: dict[str, Any] = {"role": "user", "content": message, "timestamp": user_time}
    if user_name:
        said["name"] = user_name
    turn: list[dict[str, Any]] = [said]
    if answer.strip():
        reply: dict[str, Any] = {"role": "assistant", "content": answer, "timestamp": answer_time}
        if finish_reason is not None and ChatResult(text="", finish_reason=finish_reason).truncated:
            # the reply stopped at the token cap: recorded as it is, marked as incomplete
            reply["metadata"] = {"truncated": True, "finish_reason": finish_reason}
        turn.append(reply)
    return turn


def _after(engine: "MemoryScope", user_id: str, show_consolidation: bool) -> ConsolidationReport | None:
    return engine.consolidate(user_id) if show_consolidation else None


def chat_with_memory(engine: "MemoryScope", user_id: str, message: str, *, agent_id: str = "assistant",
                     session_id: str | None = None, system_prompt: str | None = None, top_k: int | None = None,
                     now: datetime | str | None = None, show_consolidation: bool = False,
                     history: Sequence[Mapping[str, Any]] | None = None,
                     user_name: str | None = None) -> ChatTurn:
    """Answer ``message`` with the user's memories in the system prompt, then record the turn.

    Args:
        engine: the `MemoryScope` (an LLM must be configured).
        user_id, agent_id, session_id: who talks to whom, recorded with the turn.
        system_prompt: replaces the default persona text; the memory block is appended to it.
        top_k: how many memories to retrieve (default ``retrieval.top_k``).
        now: the moment of the message (default: now); relative times in it are read from here.
        show_consolidation: consolidate the user's pending messages right away (waiting for the
            LLM) and return the report in ``ChatTurn.consolidation``.
        history: earlier messages of this session, sent to the model before ``message``.
        user_name: the user's name as it should appear in memories ("Anna"; default the user id).

    Raises:
        ConfigError: no LLM is configured ("replies need a model ...").
        ModelError: the model failed after its retries (nothing is recorded then).
    """
    prepared = _prepare(engine, user_id, message, agent_id, system_prompt, top_k, now, history)
    assert engine.llm is not None
    result = engine.llm.chat(prepared.messages)
    answer = result.text
    engine.record(user_id, _turn_messages(prepared, message, answer, user_name, result.finish_reason),
                  agent_id=agent_id, session_id=session_id)
    return ChatTurn(answer=answer, memories=list(prepared.retrieval.memories),
                    consolidation=_after(engine, user_id, show_consolidation), context=prepared.retrieval.context,
                    truncated=result.truncated)


async def achat_with_memory(engine: "MemoryScope", user_id: str, message: str, *, agent_id: str = "assistant",
                            session_id: str | None = None, system_prompt: str | None = None,
                            top_k: int | None = None, now: datetime | str | None = None,
                            show_consolidation: bool = False,
                            history: Sequence[Mapping[str, Any]] | None = None,
                            user_name: str | None = None) -> ChatTurn:
    """Async twin of `chat_with_memory` (the model call uses the client's native async API)."""
    import asyncio
    prepared = await asyncio.to_thread(_prepare, engine, user_id, message, agent_id, system_prompt, top_k, now,
                                       history)
    assert engine.llm is not None
    result = await engine.llm.achat(prepared.messages)
    answer = result.text
    await asyncio.to_thread(engine.record, user_id,
                            _turn_messages(prepared, message, answer, user_name, result.finish_reason),
                            agent_id=agent_id, session_id=session_id)
    report = await asyncio.to_thread(_after, engine, user_id, show_consolidation)
    return ChatTurn(answer=answer, memories=list(prepared.retrieval.memories), consolidation=report,
                    context=prepared.retrieval.context, truncated=result.truncated)


def _fill_turn(turn: ChatTurn | None, answer: str, prepared: _Prepared) -> None:
    """Hand a finished stream's answer and the memories it was given to the caller's `ChatTurn`."""
    if turn is not None:
        turn.answer, turn.memories, turn.context = answer, list(prepared.retrieval.memories), \
            prepared.retrieval.context


def stream_chat_with_memory(engine: "MemoryScope", user_id: str, message: str, *, agent_id: str = "assistant",
                            session_id: str | None = None, system_prompt: str | None = None,
                            top_k: int | None = None, now: datetime | str | None = None,
                            history: Sequence[Mapping[str, Any]] | None = None,
                            turn: ChatTurn | None = None, user_name: str | None = None) -> Iterator[str]:
    """Like `chat_with_memory`, but yields the reply in chunks as the model writes it; the turn
    is recorded when the stream ends.

    If the stream fails or is closed early, only the user message is recorded (the user did
    say it; a partial answer is not kept). Pass a `ChatTurn` as ``turn`` to receive the full
    answer and the memories used once the stream is done.
    """
    prepared = _prepare(engine, user_id, message, agent_id, system_prompt, top_k, now, history)
    assert engine.llm is not None
    pieces: list[str] = []
    complete = False
    try:
        for piece in engine.llm.stream(prepared.messages):
            if piece:
                pieces.append(piece)
                yield piece
        complete = True
    finally:
        answer = "".join(pieces) if complete else ""
        engine.record(user_id, _turn_messages(prepared, message, answer, user_name), agent_id=agent_id,
                      session_id=session_id)
        _fill_turn(turn, answer, prepared)


async def astream_chat_with_memory(engine: "MemoryScope", user_id: str, message: str, *,
                                   agent_id: str = "assistant", session_id: str | None = None,
                                   system_prompt: str | None = None, top_k: int | None = None,
                                   now: datetime | str | None = None,
                                   history: Sequence[Mapping[str, Any]] | None = None,
                                   turn: ChatTurn | None = None, user_name: str | None = None
                                   ) -> AsyncIterator[str]:
    """Async twin of `stream_chat_with_memory`."""
    import asyncio
    prepared = await asyncio.to_thread(_prepare, engine, user_id, message, agent_id, system_prompt, top_k, now,
                                       history)
    assert engine.llm is not None
    pieces: list[str] = []
    complete = False
    try:
        async for piece in engine.llm.astream(prepared.messages):
            if piece:
                pieces.append(piece)
                yield piece
        complete = True
    finally:
        answer = "".join(pieces) if complete else ""
        await asyncio.to_thread(engine.record, user_id, _turn_messages(prepared, message, answer, user_name),
                                agent_id=agent_id, session_id=session_id)
        _fill_turn(turn, answer, prepared)


__all__ = ["ChatTurn", "chat_with_memory", "achat_with_memory", "stream_chat_with_memory",
           "astream_chat_with_memory", "build_system_prompt", "NO_MODEL"]
