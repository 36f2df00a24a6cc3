"""Long-term memory for LangChain 1.x: agent middleware, a retriever, and a classic chain memory.

Usage (agents, the LangChain 1.x way)::

    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware

    agent = create_agent(model, tools, middleware=[MemoryScopeMiddleware(engine, user_id="anna")])
    agent.invoke({"messages": [{"role": "user", "content": "Where do I live?"}]})

- `MemoryScopeMiddleware` (``langchain.agents.middleware.AgentMiddleware``): every model call
  of the agent gets the memories relevant to the latest user message appended to its system
  message (``request.override(system_message=...)``), so the agent's state and checkpoints never
  contain them; after the run (``after_agent``) the user input, the agent's tool calls of the run
  with their results (``ToolMessage``; durations timed by ``wrap_tool_call``) and the final answer
  are recorded; the tool calls are the agent's (`MemoryScope.tool_stats`), never the user's memories.
  A ``SummarizationMiddleware`` summary is never taken as the user's words; with
  ``response_format=ToolStrategy(...)`` the structured response (as JSON) is the answer and its
  structured-output tool calls are not the agent's tool calls.
  The user is taken from ``user_id`` (a string, or a callable of the runtime), else from the
  runtime context (``context.user_id`` or ``context["user_id"]``), else from
  ``config["configurable"]["user_id"]``; the LangGraph thread id, when there is one, is recorded
  as the session.
- `MemoryScopeRetriever` (``BaseRetriever``): a user's memories as ``Document`` objects
  (metadata: id, type, time, score), for RAG chains and retriever tools.
- `MemoryScopeChatMemory` (``langchain_classic`` ``BaseChatMemory``, deprecated upstream and kept
  for chains such as ``ConversationChain``): ``load_memory_variables`` returns the memories for
  the input, ``save_context`` records the exchange; ``clear`` keeps long-term memory.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.types import MemoryType, RetrievalResult
from memoryscope_plugins.validation import check_min_relevance, check_top_k

from ._common import (
    DEFAULT_TEMPLATE,
    CallSeen,
    IdSource,
    Line,
    MemoryBridge,
    MemoryConfig,
    Outcome,
    ResultSeen,
    holds_users_words,
    latest_user_text,
    log,
    procedure_ids,
    text_of,
    turn,
    turn_outcome,
)
from ._outcome import CUT_OFF
from ._team_keys import ids_key

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_classic.memory.chat_memory import BaseChatMemory

__all__ = ["MemoryScopeChatMemory", "MemoryScopeMiddleware", "MemoryScopeRetriever"]


# -- agent middleware ---------------------------------------------------------------------------------

MAX_TIMED_CALLS = 4096  # tool-call durations kept until their run is recorded

class MemoryScopeMiddleware(AgentMiddleware):
    """Long-term memory for ``langchain.agents.create_agent``.

    Args:
        memory: the engine.
        user_id: a fixed user, or ``callable(runtime) -> str | None``; when None (or the callable
            returns None) the user comes from the runtime context or ``configurable.user_id``.
            A turn with no user gets no memory (and a one-time warning).
        agent_id: recorded as the assistant (default: the ``name=`` given to ``create_agent``,
            else ``"assistant"``).
        top_k: memories injected per model call (default: the engine's setting).
        types: only these memory types are retrieved.
        template: the memory block (must contain ``{context}``).
        scope_to_agent: retrieve only memories recorded by `agent_id`.
        on_error: ``"warn"`` (a failing backend means no memories; the agent still answers) or
            ``"raise"``.
        min_relevance: relevance floor (default: the engine's ``retrieval.min_relevance``).
    """

    def __init__(self, memory: MemoryScope, *, user_id: IdSource = None, agent_id: str | None = None,
                 top_k: int | None = None, types: Sequence[MemoryType | str] | None = None,
                 template: str = DEFAULT_TEMPLATE, scope_to_agent: bool = False,
                 on_error: Literal["warn", "raise"] = "warn", min_relevance: float | None = None) -> None:
        super().__init__()
        self.config = MemoryConfig(user_id=user_id, agent_id=agent_id, top_k=top_k, types=types,
                                   template=template, scope_to_agent=scope_to_agent, on_error=on_error,
                                   min_relevance=min_relevance)
        self.bridge = MemoryBridge(memory, self.config, "langchain")
        self.tools: list[Any] = []
        self._warned_no_user = False
        self._durations: OrderedDict[str, float] = OrderedDict()  # tool call id -> milliseconds
        # (user, thread) -> the procedures the run's retrievals returned, until the run is recorded
        self._used: OrderedDict[tuple[str, str], list[str]] = OrderedDict()
        self._failed_calls: OrderedDict[str, None] = OrderedDict()  # ids of calls a failed run recorded
        # ids of the structured-output tool calls (``ToolStrategy``) the agent's model calls answered
        self._structured: OrderedDict[str, None] = OrderedDict()
        # (user, thread) -> the run's input (text, team key) as it began, until the run is recorded
        self._inputs: OrderedDict[tuple[str, str], tuple[str, str | None]] = OrderedDict()

    # -- model calls: transient injection -----------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
                        ) -> ModelResponse:
        """Add the memories for the latest user message to this model call's system message."""
        user_id = self._user(request.runtime)
        result = self.bridge.retrieve(user_id, self._query(user_id, request),
                                      agent_id=self.config.resolve_agent(default=_graph_agent_name()))
        self._note_used(user_id, request.runtime, result)
        try:
            response = handler(self._augment(request, result))
        except GraphBubbleUp:
            raise
        except Exception:
            self._record_failed(user_id, request.state, request.runtime)
            raise
        self._note_structured(response)
        return response

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        """Async twin of `wrap_model_call`."""
        user_id = self._user(request.runtime)
        result = await self.bridge.aretrieve(user_id, self._query(user_id, request),
                                             agent_id=self.config.resolve_agent(default=_graph_agent_name()))
        self._note_used(user_id, request.runtime, result)
        try:
            response = await handler(self._augment(request, result))
        except GraphBubbleUp:
            raise
        except Exception:
            await self._arecord_failed(user_id, request.state, request.runtime)
            raise
        self._note_structured(response)
        return response

    # -- the run's input, noted as the run begins -------------------------------------------------------
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Note the run's user input: a ``SummarizationMiddleware`` may summarize it away before
        the run ends, and it is recorded all the same."""
        self._note_input(self._user(runtime), state, runtime)
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        self._note_input(self._user(runtime), state, runtime)
        return None

    def _note_input(self, user_id: str | None, state: Any, runtime: Any) -> None:
        given = _run_input(state, _thread_id(runtime))
        if user_id and given is not None:
            self._inputs[(user_id, _thread_id(runtime) or "")] = given
            while len(self._inputs) > MAX_TIMED_CALLS:  # runs that never ended (interrupted)
                self._inputs.popitem(last=False)

    def _query(self, user_id: str | None, request: ModelRequest) -> str:
        """The latest user message of the model call, else (a summary took its place) the input
        the run began with; never the summary."""
        query = _latest_human_text(request.messages)
        if query or not user_id:
            return query
        began = self._inputs.get((user_id, _thread_id(request.runtime) or ""))
        return began[0] if began else ""

    def _take_input(self, user_id: str, runtime: Any) -> tuple[str, str | None] | None:
        return self._inputs.pop((user_id, _thread_id(runtime) or ""), None)

    # -- after the run: recording ----------------------------------------------------------------------
    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record this run's user input, the agent's tool calls with their results, and the final
        answer, ending the agent's run (`_run_outcome`)."""
        user_id = self._user(runtime)
        structured = self._take_structured(state)
        tools = self._tool_messages(state, structured)
        used = self._take_used(user_id, runtime)
        if user_id:
            agent_id = self.config.resolve_agent(default=_graph_agent_name())
            self.bridge.record(user_id, _run_turn(state, agent_id, tools, _thread_id(runtime), structured,
                                                  self._take_input(user_id, runtime)),
                               agent_id=agent_id,
                               session_id=_thread_id(runtime), run_outcome=_run_outcome(state, tools),
                               procedures_used=used)
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        user_id = self._user(runtime)
        structured = self._take_structured(state)
        tools = self._tool_messages(state, structured)
        used = self._take_used(user_id, runtime)
        if user_id:
            agent_id = self.config.resolve_agent(default=_graph_agent_name())
            await self.bridge.arecord(user_id, _run_turn(state, agent_id, tools, _thread_id(runtime), structured,
                                                         self._take_input(user_id, runtime)),
                                      agent_id=agent_id,
                                      session_id=_thread_id(runtime), run_outcome=_run_outcome(state, tools),
                                      procedures_used=used)
        return None

    # -- a run that raises: its calls so far end it as failed -------------------------------------------
    def _record_failed(self, user_id: str | None, state: Any, runtime: Any,
                       raised: tuple[ToolCallRequest, Exception] | None = None) -> None:
        tools = self._failed_tools(state, raised)
        self.bridge.record_failed(user_id, tools, agent_id=self.config.resolve_agent(default=_graph_agent_name()),
                                  session_id=_thread_id(runtime), procedures_used=self._take_used(user_id, runtime))

    async def _arecord_failed(self, user_id: str | None, state: Any, runtime: Any,
                              raised: tuple[ToolCallRequest, Exception] | None = None) -> None:
        tools = self._failed_tools(state, raised)
        await self.bridge.arecord_failed(user_id, tools,
                                         agent_id=self.config.resolve_agent(default=_graph_agent_name()),
                                         session_id=_thread_id(runtime),
                                         procedures_used=self._take_used(user_id, runtime))

    def _failed_tools(self, state: Any, raised: tuple[ToolCallRequest, Exception] | None) -> list[dict[str, Any]]:
        """The tool messages of a run that raised: its calls answered so far, those not answered
        with status ``unknown`` and, when a tool raised, that call with the exception (type and
        message) as its error. Their ids are kept, so a run resumed from its checkpoint does not
        record them again."""
        calls, results = _run_tool_calls(state, self._take_structured(state))
        if raised is not None:
            request, exc = raised
            call = request.tool_call
            if not any(c.call_id == call.get("id") for c in calls):
                calls.append(CallSeen(str(call.get("name") or ""), call.get("args"), call.get("id")))
            results.append(ResultSeen(call.get("id"), f"{type(exc).__name__}: {exc}", failed=True,
                                      name=call.get("name")))
        for seen in calls:
            if seen.call_id is not None:
                self._failed_calls[seen.call_id] = None
        while len(self._failed_calls) > MAX_TIMED_CALLS:
            self._failed_calls.popitem(last=False)
        return self._tool_messages_of(calls, results, keep_unanswered=True)

    # -- the procedures a run's retrievals returned ----------------------------------------------------
    def _note_used(self, user_id: str | None, runtime: Any, result: RetrievalResult) -> None:
        ids = procedure_ids([result])
        if user_id and ids:
            key = (user_id, _thread_id(runtime) or "")
            self._used[key] = list(dict.fromkeys(self._used.pop(key, []) + ids))
            while len(self._used) > MAX_TIMED_CALLS:  # runs that never ended (interrupted)
                self._used.popitem(last=False)

    def _take_used(self, user_id: str | None, runtime: Any) -> list[str]:
        return self._used.pop((user_id, _thread_id(runtime) or ""), []) if user_id else []

    # -- structured output (``response_format=ToolStrategy(...)``): not tool calls of the agent -------
    def _note_structured(self, response: Any) -> None:
        """Keep the ids of the structured-output calls a model call answered: the only tool
        messages a model call's response holds are LangChain's answers to them (the structured
        response, or the error the model is asked to correct)."""
        inner = getattr(response, "model_response", response)  # an ExtendedModelResponse wraps one
        for message in getattr(inner, "result", None) or []:
            if isinstance(message, ToolMessage) and message.tool_call_id:
                self._structured[message.tool_call_id] = None
        while len(self._structured) > MAX_TIMED_CALLS:
            self._structured.popitem(last=False)

    def _take_structured(self, state: Any) -> set[str]:
        """The ids of the structured-output calls of the latest run (taken: each run once)."""
        messages, last_human = _run_messages(state)
        if last_human is None:
            return set()
        run = messages[last_human + 1:]
        ids = {c.get("id") for m in run if isinstance(m, AIMessage) for c in m.tool_calls}
        taken = {i for i in ids if i is not None and i in self._structured}
        for call_id in taken:
            del self._structured[call_id]
        # a run resumed in another process: its structured response, the run's last message
        if _structured_response(state) is not None and run and isinstance(run[-1], ToolMessage):
            taken.add(run[-1].tool_call_id)
        return taken

    # -- tool calls: timed here, recorded after the run ----------------------------------------------
    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Any:
        """Run the tool call unchanged, timing it (its duration is recorded with the run)."""
        started = time.perf_counter()
        try:
            response = handler(request)
        except GraphBubbleUp:  # an interrupt (human in the loop) or a handoff: the run goes on
            self._timed(request, started)
            raise
        except Exception as exc:
            self._timed(request, started)
            self._record_failed(self._user(request.runtime), request.state, request.runtime, (request, exc))
            raise
        self._timed(request, started)
        return response

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
                              ) -> Any:
        """Async twin of `wrap_tool_call`."""
        started = time.perf_counter()
        try:
            response = await handler(request)
        except GraphBubbleUp:  # an interrupt (human in the loop) or a handoff: the run goes on
            self._timed(request, started)
            raise
        except Exception as exc:
            self._timed(request, started)
            await self._arecord_failed(self._user(request.runtime), request.state, request.runtime, (request, exc))
            raise
        self._timed(request, started)
        return response

    def _timed(self, request: ToolCallRequest, started: float) -> None:
        call_id = request.tool_call.get("id")
        if isinstance(call_id, str):
            self._durations[call_id] = (time.perf_counter() - started) * 1000.0
            while len(self._durations) > MAX_TIMED_CALLS:  # runs that never reach after_agent (interrupted)
                self._durations.popitem(last=False)

    def _tool_messages(self, state: Any, structured: Collection[str] = ()) -> list[dict[str, Any]]:
        calls, results = _run_tool_calls(state, structured)
        calls = [c for c in calls if c.call_id is None or c.call_id not in self._failed_calls]
        return self._tool_messages_of(calls, results)

    def _tool_messages_of(self, calls: list[CallSeen], results: list[ResultSeen], *,
                          keep_unanswered: bool = False) -> list[dict[str, Any]]:
        durations = {c.call_id: self._durations.pop(c.call_id) for c in calls
                     if c.call_id is not None and c.call_id in self._durations}
        return self.bridge.tool_messages(calls, results, durations, keep_unanswered=keep_unanswered)

    # -- helpers ---------------------------------------------------------------------------------------
    def _augment(self, request: ModelRequest, result: RetrievalResult) -> ModelRequest:
        block = self.bridge.block(result)
        if not block:
            return request
        current = request.system_message
        if current is None:
            return request.override(system_message=SystemMessage(content=block))
        if isinstance(current.content, str):
            content: Any = f"{current.content}\n\n{block}" if current.content else block
        else:
            content = [*current.content, {"type": "text", "text": block}]
        return request.override(system_message=SystemMessage(content=content))

    def _user(self, runtime: Any) -> str | None:
        try:
            user_id = self.config.resolve_user(runtime) or _context_user(runtime) or _configurable_user()
        except Exception as exc:  # noqa: BLE001
            self.bridge.report_failure("user id resolution", "?", exc)
            return None
        if not user_id and not self._warned_no_user:
            self._warned_no_user = True
            log.warning("langchain: no user id (set user_id=, runtime context user_id or "
                        "configurable.user_id); memory is skipped")
        return user_id


def _latest_human_text(messages: Sequence[Any]) -> str:
    return latest_user_text([_line(message) for message in messages])


def _is_summary(message: Any) -> bool:
    """Whether `message` is the summary LangChain's ``SummarizationMiddleware`` put in place of
    older messages: a ``HumanMessage`` written by a model (``additional_kwargs["lc_source"] ==
    "summarization"``), never the user's words."""
    return isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") == "summarization"


def _line(message: Any) -> Line:
    """A LangChain message in the adapters' common shape: only a ``HumanMessage`` is the user's
    (not a conversation summary, `_is_summary`)."""
    role = "user" if isinstance(message, HumanMessage) and not _is_summary(message) else "other"
    return Line(role, getattr(message, "name", None), text_of(getattr(message, "content", None)))


#: A UUID inside a message id: LangGraph gives a message without an id a ``uuid4``, LangChain an
#: AI message ``lc_run--<uuid>``; such an id names one message whatever the conversation.
UNIQUE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _key(messages: Sequence[Any], thread: str | None) -> str | None:
    """The team key of `messages` (`ids_key`): their ids within the `thread`. Without a thread
    (no checkpointer) only ids that are unique by themselves (`UNIQUE_ID`) make a key: ids an
    application numbers per conversation ("1", "2"...) would make a message said again in a later
    conversation look recorded already, and it would be lost (without a key it is recorded again,
    a duplicate at worst). LangGraph gives a run no id of its own that every agent of one
    invocation shares, so the key cannot be scoped to the invocation instead."""
    if thread:
        return ids_key(f"langchain:{thread}", messages)
    if all(isinstance(m.id, str) and UNIQUE_ID.search(m.id) for m in messages):
        return ids_key("langchain", messages)
    return None


def _structured_response(state: Any) -> Any:
    if isinstance(state, dict):
        return state.get("structured_response")
    return getattr(state, "structured_response", None)


def _structured_text(value: Any) -> str:
    """A structured response (``ToolStrategy``) as the run's answer: JSON, readable."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular structure
        return str(value)


def _run_input(state: Any, thread: str | None) -> tuple[str, str | None] | None:
    """The user input of the latest run (the trailing block of human messages, a conversation
    summary excluded: `_is_summary`) as (text, team key); None when a summary took its place."""
    messages, last_human = _run_messages(state)
    if last_human is None or _is_summary(messages[last_human]):
        return None
    first = last_human
    while first > 0 and isinstance(messages[first - 1], HumanMessage) and not _is_summary(messages[first - 1]):
        first -= 1
    inputs = messages[first:last_human + 1]
    lines = [_line(m) for m in inputs]
    return (latest_user_text(lines, whole_input=True),
            _key([m for m, line in zip(inputs, lines) if holds_users_words(line)], thread))


def _run_turn(state: Any, agent_id: str, tools: Sequence[dict[str, Any]] = (), thread: str | None = None,
              structured: Collection[str] = (), began: tuple[str, str | None] | None = None) -> list[dict[str, Any]]:
    """The user input of the latest run (`_run_input`; the input the run `began` with when a
    conversation summary took its place in the state), the agent's tool calls of the run
    (`tools`) and the run's answer: the structured response (JSON) when the run ended on one of
    its `structured` output calls, else the last AI message without tool calls after that input,
    or, for a run that ended on a ``return_direct`` tool, the tool result it returned. Nothing from
    earlier runs. The messages' team keys are their state ids within the `thread` (`_key`)."""
    messages, last_human = _run_messages(state)
    if last_human is None:
        return []
    user_text, user_key = _run_input(state, thread) or began or ("", None)
    answer, answer_key = "", None
    after = messages[last_human + 1:]
    if after and isinstance(after[-1], ToolMessage) and after[-1].tool_call_id in structured:
        value = _structured_response(state)
        if value is not None:
            answer, answer_key = _structured_text(value), _key([after[-1]], thread)
    else:
        for message in reversed(after):
            if isinstance(message, AIMessage) and not message.tool_calls and text_of(message.content).strip():
                answer, answer_key = text_of(message.content), _key([message], thread)
                break
        else:
            if after and isinstance(after[-1], ToolMessage):  # the run ended on a return_direct tool
                answer, answer_key = text_of(after[-1].content), _key([after[-1]], thread)
    return turn(user_text, answer, agent_name=agent_id, tools=tools, user_key=user_key, reply_key=answer_key)


def _run_outcome(state: Any, tools: Sequence[dict[str, Any]]) -> Outcome:
    """The outcome of a run that ended (`_outcome.turn_outcome` of its calls), failed too when the
    model's final answer was cut off (its ``finish_reason`` "length" or "content_filter")."""
    messages, last_human = _run_messages(state)
    final = messages[-1] if messages and last_human is not None and len(messages) - 1 > last_human else None
    reason = (getattr(final, "response_metadata", None) or {}).get("finish_reason") \
        if isinstance(final, AIMessage) else None
    return turn_outcome(tools, failed=reason in CUT_OFF)


def _run_messages(state: Any) -> tuple[list[AnyMessage], int | None]:
    """The state's messages and the position of the latest human message (None: none). A
    conversation summary counts (the messages after it are the run's, even when it replaced the
    run's input), though it holds no words of the user (`_run_turn`)."""
    messages: list[AnyMessage] = list(state.get("messages", []) if isinstance(state, dict) else
                                      getattr(state, "messages", []))
    last_human = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)), None)
    return messages, last_human


def _run_tool_calls(state: Any, structured: Collection[str] = ()) -> tuple[list[CallSeen], list[ResultSeen]]:
    """The tool calls the agent's model made in the latest run (the AI messages after the latest
    human message; arguments LangChain could not parse as their raw text) and the tool messages
    answering them (``status="error"``: failed); the `structured` output calls left out (they
    shape the answer, the agent calls no tool)."""
    messages, last_human = _run_messages(state)
    if last_human is None:
        return [], []
    calls: list[CallSeen] = []
    results: list[ResultSeen] = []
    for message in messages[last_human + 1:]:
        if isinstance(message, AIMessage):
            calls += [CallSeen(c["name"], c.get("args"), c.get("id")) for c in message.tool_calls
                      if c.get("id") not in structured]
            calls += [CallSeen(c.get("name") or "", c.get("args"), c.get("id")) for c in message.invalid_tool_calls]
        elif isinstance(message, ToolMessage) and message.tool_call_id not in structured:
            results.append(ResultSeen(message.tool_call_id, text_of(message.content),
                                      failed=message.status == "error", name=message.name))
    return calls, results


def _graph_agent_name() -> str | None:
    """The ``name=`` given to ``create_agent`` (LangChain puts it in the run's metadata)."""
    try:
        from langgraph.config import get_config
        value = (get_config().get("metadata") or {}).get("lc_agent_name")
    except Exception:  # noqa: BLE001 - outside a runnable context
        return None
    return value if isinstance(value, str) and value.strip() else None


def _context_user(runtime: Any) -> str | None:
    context = getattr(runtime, "context", None)
    if context is None:
        return None
    value = context.get("user_id") if isinstance(context, dict) else getattr(context, "user_id", None)
    return value if isinstance(value, str) and value.strip() else None


def _configurable_user() -> str | None:
    try:
        from langgraph.config import get_config
        value = (get_config().get("configurable") or {}).get("user_id")
    except Exception:  # noqa: BLE001 - outside a runnable context, or Python 3.10 in async code
        return None
    return value if isinstance(value, str) and value.strip() else None


def _thread_id(runtime: Any) -> str | None:
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    return str(thread) if thread else None


# -- retriever ----------------------------------------------------------------------------------------

NO_FLOOR = -1.0  # `MemoryScope.retrieve`'s min_relevance that turns the relevance floor off
SEARCH_KWARGS = frozenset({"k", "score_threshold", "min_relevance"})
CALL_OPTIONS = frozenset({"k", "top_k", "user_id", "score_threshold", "min_relevance"})


class MemoryScopeRetriever(BaseRetriever):
    """A user's long-term memories as LangChain ``Document`` objects.

    ``page_content`` is the memory text; metadata holds ``id``, ``type``, ``created_at``,
    ``event_start``/``event_end`` (when known), ``speaker`` and ``score``. A failing backend
    returns no documents (logged) unless ``on_error="raise"``.

    As LangChain retrievers do, it returns the `k` best documents (fewer only when the user has
    fewer memories); a relevance floor is opt-in, as with ``VectorStoreRetriever``:
    ``min_relevance=0.1`` (or ``search_kwargs={"score_threshold": 0.1}``) keeps only memories
    that share a word with the query, reach that calibrated similarity (0 = unrelated texts,
    1 = the same text; see `MemoryScope.retrieve`) or fall in the time the query names, and
    ``search_type="similarity_score_threshold"`` without a threshold applies the engine's own
    floor (``retrieval.min_relevance``).

    Per call: ``invoke(query, k=3)`` (or ``top_k=``) sets how many documents,
    ``min_relevance=`` (or ``score_threshold=``) the floor (-1: none), and the user comes from
    ``user_id=`` or ``config={"configurable": {"user_id": ...}}`` (else the instance's `user_id`;
    with neither, no documents).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    memory: MemoryScope
    user_id: str | None = None
    agent_id: str | None = None
    k: int | None = Field(None, gt=0, le=1000, alias="top_k", description="documents per query")
    types: list[str] | None = None
    scope_to_agent: bool = False
    min_relevance: float | None = Field(None, ge=-1, le=1,
                                        description="relevance floor (default: none, k documents)")
    search_type: Literal["similarity", "similarity_score_threshold"] = "similarity"
    search_kwargs: dict[str, Any] = Field(default_factory=dict,
                                          description="k, score_threshold (or min_relevance)")
    on_error: Literal["warn", "raise"] = "warn"
    _bridge: MemoryBridge = PrivateAttr()

    @property
    def top_k(self) -> int | None:
        """The number of documents per query (``k``)."""
        return self.k

    def model_post_init(self, context: Any) -> None:
        """Check `search_kwargs` and build the fail-safe engine wrapper."""
        super().model_post_init(context)
        unknown = set(self.search_kwargs) - SEARCH_KWARGS
        if unknown:
            raise ValueError(f"unknown search_kwargs {sorted(unknown)}; expected {sorted(SEARCH_KWARGS)}")
        _check_k(self.search_kwargs.get("k"))
        _floor_of(self.search_kwargs)
        config = MemoryConfig(user_id=self.user_id, agent_id=self.agent_id, top_k=self.k, types=self.types,
                              scope_to_agent=self.scope_to_agent, on_error=self.on_error)
        self._bridge = MemoryBridge(self.memory, config, "langchain")

    def invoke(self, input: str, config: Any = None, **kwargs: Any) -> list[Document]:
        """Retrieve documents; see the class docstring for the per-call options."""
        return super().invoke(input, config, **_call_options(config, kwargs))

    async def ainvoke(self, input: str, config: Any = None, **kwargs: Any) -> list[Document]:
        """Async twin of `invoke`."""
        return await super().ainvoke(input, config, **_call_options(config, kwargs))

    def _call(self, kwargs: dict[str, Any]) -> tuple[str | None, int | None, float | None]:
        """The user, k and floor of one call (floor None: the engine's ``retrieval.min_relevance``)."""
        unknown = set(kwargs) - CALL_OPTIONS
        if unknown:
            raise TypeError(f"unknown retriever options {sorted(unknown)}; expected {', '.join(sorted(CALL_OPTIONS))}")
        k = _check_k(kwargs.get("k", kwargs.get("top_k")))
        if k is None:
            k = self.search_kwargs.get("k")
        user_id = kwargs.get("user_id") or self.user_id
        if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise ValueError("user_id must be a non-empty string")
        for floor in (_floor_of(kwargs), _floor_of(self.search_kwargs), self.min_relevance):
            if floor is not None:
                return user_id, k, floor
        return user_id, k, None if self.search_type == "similarity_score_threshold" else NO_FLOOR

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        user_id, k, floor = self._call(kwargs)
        return _documents(self._bridge.retrieve(user_id, query, agent_id=self.agent_id, top_k=k, min_relevance=floor))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        user_id, k, floor = self._call(kwargs)
        return _documents(await self._bridge.aretrieve(user_id, query, agent_id=self.agent_id, top_k=k,
                                                       min_relevance=floor))


def _check_k(k: Any) -> int | None:
    return None if k is None else check_top_k(k, "k")


def _floor_of(options: dict[str, Any]) -> float | None:
    """The floor `options` ask for (``min_relevance`` or LangChain's ``score_threshold``), or None."""
    if "min_relevance" in options and "score_threshold" in options:
        raise ValueError("give min_relevance or score_threshold, not both")
    floor = options.get("min_relevance", options.get("score_threshold"))
    return None if floor is None else check_min_relevance(floor, "min_relevance (score_threshold)")


def _call_options(config: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The per-call options, with ``configurable.user_id`` moved into them."""
    configurable = (config or {}).get("configurable") or {} if isinstance(config, dict) else {}
    if "user_id" not in kwargs and configurable.get("user_id"):
        return {**kwargs, "user_id": configurable["user_id"]}
    return kwargs


def _documents(result: RetrievalResult) -> list[Document]:
    documents = []
    for item in result.memories:
        memory = item.memory
        metadata: dict[str, Any] = {"id": memory.id, "type": memory.type.value, "score": item.score,
                                    "created_at": memory.created_at.isoformat(), "speaker": memory.speaker,
                                    "agent_id": memory.agent_id}
        if memory.event_start is not None:
            metadata["event_start"] = memory.event_start.isoformat()
        if memory.event_end is not None:
            metadata["event_end"] = memory.event_end.isoformat()
        documents.append(Document(page_content=memory.content, metadata=metadata, id=memory.id))
    return documents


# -- classic chain memory -----------------------------------------------------------------------------

class MemoryScopeChatMemory(BaseChatMemory):
    """Long-term memory for ``langchain_classic`` chains (``ConversationChain``, ``LLMChain``...).

    ``load_memory_variables`` puts the memories relevant to the input under `memory_key`
    (default ``"history"``, the variable ``ConversationChain``'s prompt expects): the memory
    block as a string, or ``[SystemMessage(block)]`` with ``return_messages=True`` (empty when
    nothing is found). ``save_context`` records the exchange; ``clear`` starts a new conversation and
    keeps long-term memory (delete it with ``engine.delete_all``). It keeps no short-term buffer: combine it with a
    buffer memory (``CombinedMemory``) for the running conversation.

    ``BaseChatMemory`` is deprecated by LangChain (removal planned for 2.0); prefer
    `MemoryScopeMiddleware` with ``create_agent`` for new code.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: MemoryScope
    user_id: str
    agent_id: str = "assistant"
    memory_key: str = "history"
    top_k: int | None = Field(None, gt=0, le=1000)
    types: list[str] | None = None
    template: str = DEFAULT_TEMPLATE
    scope_to_agent: bool = False
    on_error: Literal["warn", "raise"] = "warn"
    min_relevance: float | None = Field(None, ge=-1, le=1)
    _bridge: MemoryBridge = PrivateAttr()
    _used: list[str] = PrivateAttr(default_factory=list)  # the procedures the latest load returned

    def __init__(self, **data: Any) -> None:
        with warnings.catch_warnings():  # BaseChatMemory's own deprecation notice; documented above
            warnings.simplefilter("ignore", DeprecationWarning)
            super().__init__(**data)

    def model_post_init(self, context: Any) -> None:
        """Build the fail-safe engine wrapper."""
        super().model_post_init(context)
        config = MemoryConfig(user_id=self.user_id, agent_id=self.agent_id, top_k=self.top_k, types=self.types,
                              template=self.template, scope_to_agent=self.scope_to_agent, on_error=self.on_error,
                              min_relevance=self.min_relevance)
        self._bridge = MemoryBridge(self.memory, config, "langchain")

    @property
    def memory_variables(self) -> list[str]:
        """The one variable this memory adds to a chain's inputs."""
        return [self.memory_key]

    def _query(self, inputs: dict[str, Any]) -> str:
        from langchain_classic.memory.utils import get_prompt_input_key
        key = self.input_key or get_prompt_input_key(inputs, self.memory_variables)
        return text_of(inputs.get(key))

    def _variables(self, result: RetrievalResult) -> dict[str, Any]:
        self._used = procedure_ids([result])
        block = self._bridge.block(result)
        if self.return_messages:
            messages: list[BaseMessage] = [SystemMessage(content=block)] if block else []
            return {self.memory_key: messages}
        return {self.memory_key: block}

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The memories relevant to the chain input."""
        return self._variables(self._bridge.retrieve(self.user_id, self._query(inputs), agent_id=self.agent_id))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async twin of `load_memory_variables`."""
        return self._variables(await self._bridge.aretrieve(self.user_id, self._query(inputs),
                                                            agent_id=self.agent_id))

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Record the exchange (the chain input and its output), ending the agent's run as
        ``"unknown"`` (a chain gives no outcome; `_outcome`), with the procedures the latest load
        returned as the ones it used."""
        user_text, reply = self._get_input_output(inputs, outputs)
        used, self._used = self._used, []
        self._bridge.record(self.user_id, turn(text_of(user_text), text_of(reply), agent_name=self.agent_id),
                            agent_id=self.agent_id, run_outcome="unknown", procedures_used=used)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Async twin of `save_context`."""
        user_text, reply = self._get_input_output(inputs, outputs)
        used, self._used = self._used, []
        await self._bridge.arecord(self.user_id, turn(text_of(user_text), text_of(reply), agent_name=self.agent_id),
                                   agent_id=self.agent_id, run_outcome="unknown", procedures_used=used)

    def clear(self) -> None:
        """Start a new conversation: clears the (unused) chat buffer only.

        Long-term memory is never deleted here: ``CombinedMemory.clear()`` and other "new
        conversation" calls reach this method. Delete a user's memories explicitly with
        ``engine.delete_all(user_id)``."""
        self.chat_memory.clear()

    async def aclear(self) -> None:
        """Async twin of `clear` (long-term memory is kept)."""
        await self.chat_memory.aclear()
