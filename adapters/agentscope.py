"""Long-term memory for AgentScope 2.x agents, as a middleware.

Usage::

    from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware

    mw = MemoryScopeMiddleware(engine, user_id="anna")               # mode="static_control"
    agent = Agent(name="Friday", system_prompt="...", model=model, middlewares=[mw])

For agent-controlled memory (``mode="agent_control"`` or ``"both"``) also give the agent the
middleware's tools: ``Agent(..., toolkit=Toolkit(tools=await mw.list_tools()), middlewares=[mw])``.

Modelled on AgentScope's own ``Mem0Middleware`` (same modes, same tool names as AgentScope 1.x's
long-term memory), with one deliberate difference: recalled memories are *not* appended to
``agent.state.context`` (where Mem0Middleware's notes pile up turn after turn). They are added
to each model call of the reply through ``on_model_call``, as the same kind of message Mem0 uses
(an assistant ``Msg`` named "memory" holding a ``HintBlock``, which formatters turn into a user
message), placed right after the user's message. The agent's context stays clean, and context
compression never summarises memory blocks into the conversation.

- static_control: ``on_reply`` retrieves for the user's input before the reply and records the
  user/assistant exchange after it (in a ``finally``, as Mem0Middleware does), with the agent's
  tool calls of the reply (each ``ToolCallBlock`` with its ``ToolResultBlock``, timed by
  ``on_acting``) as the agent's (`MemoryScope.tool_stats`), never as the user's memories.
- agent_control: ``list_tools()`` gives ``retrieve_from_memory(keywords, limit)`` and
  ``record_to_memory(thinking, content)``; ``on_system_prompt`` tells the model about them.
- both: the two together.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from agentscope.event import (
    ExternalExecutionResultEvent,
    ToolResultEndEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from agentscope.message import AssistantMsg, HintBlock, Msg, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolBase, ToolChunk

from memoryscope_plugins.engine import MemoryScope, detect_language
from memoryscope_plugins.log_hygiene import user_ref
from memoryscope_plugins.retrieval.context import format_context
from memoryscope_plugins.retrieval.present import asks_about_present
from memoryscope_plugins.types import MemoryType, ScoredMemory, utc_now

from ._common import (
    DEFAULT_TEMPLATE,
    CallSeen,
    Line,
    MemoryBridge,
    MemoryConfig,
    Outcome,
    ResultSeen,
    holds_users_words,
    latest_user_index,
    latest_user_text,
    log,
    procedure_ids,
    text_of,
    turn,
    turn_outcome,
)
from ._team_keys import ids_key
from ._tools import TOOL_NAMES, MemoryTools, clamp_limit, tool_spec

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = ["DEFAULT_TOOL_INSTRUCTIONS", "MEMORY_MSG_NAME", "MemoryScopeMiddleware"]

MAX_TIMED_CALLS = 4096  # tool-call durations kept until their reply is recorded
#: The name of the transient message that carries recalled memories into a model call.
MEMORY_MSG_NAME = "memory"
_READ_ONLY = frozenset({"search_memory", "recall_entity"})  # the tools that only read

#: The system-prompt section that tells the model about the memory tools (agent control).
DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have the `retrieve_from_memory` and `record_to_memory` tools. Retrieve when the answer may "
    "depend on what the user told you in earlier conversations; record durable facts about the user "
    "(preferences, plans, people, events) that will matter later."
)

Mode = Literal["static_control", "agent_control", "both"]

#: What AgentScope's ``Agent`` answers while a reply waits for a tool confirmation or an external
#: execution (a ``TeamPipeline`` leader waiting for its members, human-in-the-loop). It is not
#: the agent's answer: the real one comes from a later call that resumes the reply.
PLACEHOLDER_PREFIX = "I'm waiting for your permission or the external execution to finish"
#: The inputs that resume a paused reply (any other input, ``None`` included, starts a new one:
#: AgentScope refuses it while a reply is paused).
_RESUMPTIONS = (UserConfirmResultEvent, ExternalExecutionResultEvent, UserInterruptEvent)


class MemoryScopeMiddleware(MiddlewareBase):
    """Long-term memory for an AgentScope ``Agent``.

    Args:
        memory: the engine.
        user_id: whose memories are read and written.
        agent_id: recorded as the assistant; default: the agent's name.
        mode: ``"static_control"`` (automatic retrieve + record), ``"agent_control"`` (tools only)
            or ``"both"``.
        top_k: memories injected per reply, and the tools' default limit.
        types: only these memory types are retrieved.
        template: the memory block (must contain ``{context}``).
        scope_to_agent: retrieve only memories recorded by this agent id.
        on_error: ``"warn"`` (a failing backend means no memories; the agent still replies) or
            ``"raise"``.
        tool_instructions: appended to the system prompt in agent_control / both modes.
        min_relevance: relevance floor (default: the engine's ``retrieval.min_relevance``).
        tool_set: which tools `list_tools` gives in agent_control / both modes:
            ``"long_term_memory"`` (AgentScope's long-term memory tools ``retrieve_from_memory``
            and ``record_to_memory``) or ``"memory"`` (``search_memory``, ``recall_entity``,
            ``add_memory``, ``update_memory``, ``delete_memory``, the first four as AgentScope 2.x's
            memory middlewares name them).

    Who is who: the input of a reply is the user's, except for a member of a ``TeamPipeline``,
    whose input is its leader's instruction: it is recorded as the leader's words. A reply that
    pauses for a confirmation or an external execution is recorded once it resumes (a
    ``UserConfirmResultEvent``, ``ExternalExecutionResultEvent`` or ``UserInterruptEvent``) and
    ends with the real answer, never with AgentScope's "I'm waiting for your permission..." text.
    A reply to an input without text (an image alone, a blank message) is recorded without user
    words: its answer and tool calls.
    """

    def __init__(self, memory: MemoryScope, *, user_id: str, agent_id: str | None = None,
                 mode: Mode = "static_control", top_k: int | None = None,
                 types: Sequence[MemoryType | str] | None = None, template: str = DEFAULT_TEMPLATE,
                 scope_to_agent: bool = False, on_error: Literal["warn", "raise"] = "warn",
                 tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS, min_relevance: float | None = None,
                 tool_set: Literal["long_term_memory", "memory"] = "long_term_memory") -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("MemoryScopeMiddleware needs a non-empty user_id")
        if mode not in ("static_control", "agent_control", "both"):
            raise ValueError(f"unknown mode {mode!r}; expected 'static_control', 'agent_control' or 'both'")
        self.config = MemoryConfig(user_id=user_id, agent_id=agent_id, top_k=top_k, types=types,
                                   template=template, scope_to_agent=scope_to_agent, on_error=on_error,
                                   min_relevance=min_relevance)
        self.bridge = MemoryBridge(memory, self.config, "agentscope")
        self._agent_name: str | None = None  # the agent this middleware serves (for the tools)
        # id(agent) -> (input, its speaker, the procedures retrieved for it) of a paused reply
        # a paused reply's input: (its text, who said it when not the user, procedures used, team key)
        self._pending: dict[int, tuple[str, str | None, list[str], str | None]] = {}
        self.mode: Mode = mode
        if tool_set not in ("long_term_memory", "memory"):
            raise ValueError("tool_set must be 'long_term_memory' or 'memory'")
        self.tool_set = tool_set
        if tool_set == "memory" and tool_instructions == DEFAULT_TOOL_INSTRUCTIONS:
            tool_instructions = DEFAULT_TOOL_INSTRUCTIONS.replace(
                "`retrieve_from_memory` and `record_to_memory` tools. Retrieve",
                "`search_memory`, `recall_entity`, `add_memory`, `update_memory` and `delete_memory` tools. "
                "Recall what is known about a person, place or thing the user names. Search").replace(
                "; record durable", "; add durable")
        self.tool_instructions = tool_instructions
        self._blocks: dict[int, tuple[str, str | None]] = {}  # id(agent) -> (block, input msg id)
        self._tool_ids: dict[int, list[str]] = {}  # id(agent) -> the tool calls its (paused) reply finished
        self._durations: dict[str, float] = {}  # tool call id -> milliseconds, timed by on_acting

    @property
    def user_id(self) -> str:
        """Whose memories this middleware reads and writes."""
        user_id = self.config.user_id
        assert isinstance(user_id, str)  # __init__ takes a non-empty string only
        return user_id

    # -- hooks -------------------------------------------------------------------------------------
    async def on_reply(self, agent: Agent, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
                       ) -> AsyncGenerator:
        """Retrieve before the reply; record the exchange after it (static_control / both)."""
        if self.mode == "agent_control":
            async for item in next_handler(**input_kwargs):
                yield item
            return
        self._agent_name = agent.name
        agent_id = self.config.resolve_agent(default=agent.name)
        inputs = input_kwargs.get("inputs")
        query, input_id, key = _query_of(inputs)
        speaker = _team_leader() if query else None
        used: list[str] = []
        resumes = isinstance(inputs, _RESUMPTIONS)
        if resumes and id(agent) in self._pending:  # a paused reply resumes
            query, speaker, used, key = self._pending[id(agent)]
            input_id = None
        if query:
            result = await self.bridge.aretrieve(self.user_id, query, agent_id=agent_id)
            used = list(dict.fromkeys(used + procedure_ids([result])))
            block = self.bridge.block(result)
            if block:
                self._blocks[id(agent)] = (block, input_id)
        final: Msg | None = None
        raised = produced = False
        try:
            async for item in next_handler(**input_kwargs):
                produced = True
                if isinstance(item, Msg) and item.role == "assistant":
                    final = item
                elif isinstance(item, ToolResultEndEvent):
                    self._tool_ids.setdefault(id(agent), []).append(item.tool_call_id)
                yield item
        except Exception:
            raised = True
            raise
        finally:
            self._blocks.pop(id(agent), None)
            # refused: raised before it produced anything (AgentScope refusing an input, below)
            await self._record(agent, agent_id, (query, speaker, used, key), final, raised, resumes,
                               refused=raised and not produced)

    async def _record(self, agent: Agent, agent_id: str, asked: tuple[str, str | None, list[str], str | None],
                      final: Msg | None, raised: bool, resumes: bool, *, refused: bool = False) -> None:
        """Record a finished reply with the agent's tool calls, ending the agent's run (`_outcome`;
        a reply that raised records its calls only); keep the input (and the calls) of a paused
        one for when it resumes. An input without text (an image, a blank message) records the
        reply and the calls without user words."""
        query, speaker, used, key = asked
        answer = (final.get_text_content() or "") if final is not None else ""
        if final is not None and answer.strip().startswith(PLACEHOLDER_PREFIX):
            self._pending[id(agent)] = asked
            return
        if refused and not resumes and id(agent) in self._pending:
            # AgentScope refuses a new input while a reply waits for a resumption event (before
            # the reply produces anything): that reply stays parked, so its input and tool calls
            # are kept for when it resumes; a reply that failed after it began is recorded below
            return
        tools = self._tool_rows(agent, self._tool_ids.pop(id(agent), []))
        if raised:
            self._pending.pop(id(agent), None)
            await self.bridge.arecord_failed(self.user_id, tools, agent_id=agent_id, procedures_used=used)
            return
        if final is None:
            return
        self._pending.pop(id(agent), None)
        answer_key = ids_key("agentscope", [final])
        if speaker is None:
            rows = turn(query, answer, agent_name=agent_id, tools=tools, user_key=key, reply_key=answer_key)
        else:  # a team member: its input is the leader's instruction, not the user's words
            rows = [*turn(None, query, agent_name=speaker, tools=tools, reply_key=key),
                    *turn(None, answer, agent_name=agent_id, reply_key=answer_key)]
        await self.bridge.arecord(self.user_id, rows, agent_id=agent_id, run_outcome=_outcome(final, tools),
                                  procedures_used=used)

    def _tool_rows(self, agent: Agent, ids: list[str]) -> list[dict[str, Any]]:
        """The tool messages of the calls with these ids: each ``ToolCallBlock`` of the agent's
        context with the ``ToolResultBlock`` answering it (``success``: ok; ``error``, ``denied``,
        ``interrupted``: error), timed by `on_acting` when it ran the tool."""
        wanted = set(ids)
        durations = {i: self._durations.pop(i) for i in ids if i in self._durations}
        if not wanted:
            return []
        calls: list[CallSeen] = []
        results: list[ResultSeen] = []
        for message in getattr(getattr(agent, "state", None), "context", None) or []:
            content = getattr(message, "content", None)
            for block in content if isinstance(content, list) else []:
                if isinstance(block, ToolCallBlock) and block.id in wanted:
                    calls.append(CallSeen(block.name, block.input, block.id))
                elif isinstance(block, ToolResultBlock) and block.id in wanted and block.state != "running":
                    results.append(ResultSeen(block.id, text_of(block.output), failed=block.state != "success",
                                              name=block.name))
        return self.bridge.tool_messages(calls, results, durations)

    async def on_acting(self, agent: Agent, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
                        ) -> AsyncGenerator:
        """Run the tool unchanged, timing it (its duration is recorded with the reply)."""
        started = time.perf_counter()
        try:
            async for item in next_handler(**input_kwargs):
                yield item
        finally:
            call = input_kwargs.get("tool_call")
            if isinstance(call, ToolCallBlock) and self.mode != "agent_control":
                self._durations[call.id] = (time.perf_counter() - started) * 1000.0
                while len(self._durations) > MAX_TIMED_CALLS:  # replies that never finished
                    self._durations.pop(next(iter(self._durations)))

    async def on_model_call(self, agent: Agent, input_kwargs: dict, next_handler: Callable[..., Any]) -> Any:
        """Add this reply's recalled memories to the messages of this model call only."""
        entry = self._blocks.get(id(agent))
        if entry is None:
            return await next_handler(**input_kwargs)
        block, input_id = entry
        messages = _with_memory(list(input_kwargs.get("messages") or []), block, input_id)
        return await next_handler(**{**input_kwargs, "messages": messages})

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        """Advertise the memory tools (agent_control / both)."""
        self._agent_name = getattr(agent, "name", None) or self._agent_name
        if self.mode == "static_control" or not self.tool_instructions:
            return current_prompt
        return f"{current_prompt}\n\n{self.tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """``retrieve_from_memory`` and ``record_to_memory`` (agent_control / both), else []."""
        if self.mode == "static_control":
            return []
        allow = PermissionDecision(behavior=PermissionBehavior.ALLOW,
                                   message="auto-allowed: MemoryScope long-term memory tool")
        if self.tool_set == "memory":
            return [FunctionTool(getattr(self, name), description=tool_spec(name).description,
                                 input_schema=tool_spec(name).parameters, is_concurrency_safe=name in _READ_ONLY,
                                 is_read_only=name in _READ_ONLY, permission=allow) for name in TOOL_NAMES]
        return [
            FunctionTool(self.retrieve_from_memory, is_concurrency_safe=True, is_read_only=True, permission=allow),
            FunctionTool(self.record_to_memory, is_concurrency_safe=False, is_read_only=False, permission=allow),
        ]

    # -- the tools -----------------------------------------------------------------------------------
    async def retrieve_from_memory(self, keywords: list[str], limit: int = 5) -> ToolChunk:
        """Retrieve memories about the user from earlier conversations.

        Args:
            keywords (list[str]):
                Short, targeted search phrases, e.g. a person's name, a date, a place, or a phrase
                describing what to recall. Each is searched separately; results are merged.
            limit (int):
                The maximum number of memories per keyword.
        """
        keywords = [k for k in (keywords or []) if isinstance(k, str) and k.strip()]
        if not keywords:
            return _chunk("(no keywords given: nothing to search)")
        limit = clamp_limit(limit, self.config.top_k or 5)
        engine = self.bridge.memory
        try:
            results = await asyncio.gather(*[
                engine.aretrieve(self.user_id, k, top_k=limit, types=self.config.types,
                                 agent_id=self._tool_agent() if self.config.scope_to_agent else None,
                                 min_relevance=self.config.min_relevance)
                for k in keywords])
        except Exception as exc:  # noqa: BLE001
            log.warning("agentscope: retrieve_from_memory failed for user %s (%s)", user_ref(self.user_id),
                        type(exc).__name__)
            return _chunk(f"Memory is unavailable right now ({type(exc).__name__}).", error=True)
        merged: dict[str, ScoredMemory] = {}
        for result in results:
            for item in result.memories:
                if item.memory.id not in merged or merged[item.memory.id].score < item.score:
                    merged[item.memory.id] = item
        if not merged:
            return _chunk("(no relevant memories found)")
        language: str = engine.settings.language
        if language == "auto":
            language = detect_language(" ".join(keywords))
        # the block the keywords' own contexts would show: their hits, the turns beside them, the
        # second hop's lines, today's date, and the "newest holds now" header for a present question
        extra = [m for result in results for m in (*result.neighbours, *result.second_hop) if m.id not in merged]
        return _chunk(format_context([*merged.values(), *extra], language, now=utc_now(),
                                     with_time=engine.settings.retrieval.context_with_time,
                                     resolve_times=engine.settings.retrieval.context_resolve_times,
                                     present=any(asks_about_present(k) for k in keywords)))

    async def record_to_memory(self, thinking: str, content: list[str]) -> ToolChunk:
        """Record important information about the user to long-term memory. Be specific and concise:
        who, when, where, what, why.

        Args:
            thinking (str):
                Why this is worth remembering. Not stored.
            content (list[str]):
                The facts to remember, one complete standalone sentence per item.
        """
        facts = [c for c in (content or []) if isinstance(c, str) and c.strip()]
        if not facts:
            return _chunk("`content` is empty: nothing recorded.", error=True)
        agent_id = self._tool_agent()
        try:
            for fact in facts:
                await self.bridge.memory.aadd(self.user_id, fact, agent_id=agent_id)
        except Exception as exc:  # noqa: BLE001
            log.warning("agentscope: record_to_memory failed for user %s (%s)", user_ref(self.user_id),
                        type(exc).__name__)
            return _chunk(f"Could not record to memory ({type(exc).__name__}).", error=True)
        return _chunk(f"Recorded {len(facts)} item(s) to long-term memory.")

    # the memory tool set: `MemoryTools` (see `tool_spec` for what the model reads) as tool chunks
    def _tools(self) -> MemoryTools:
        return MemoryTools(self.bridge.memory, user_id=self.user_id, agent_id=self._tool_agent(),
                           scope_to_agent=self.config.scope_to_agent, min_relevance=self.config.min_relevance)

    async def search_memory(self, query: str, limit: int = 5) -> ToolChunk:
        """The ``search_memory`` tool: `MemoryTools.search_memory` for this middleware's user."""
        return _chunk(await self._tools().asearch_memory(query, limit))

    async def recall_entity(self, name: str, limit: int = 10) -> ToolChunk:
        """The ``recall_entity`` tool: `MemoryTools.recall_entity` for this middleware's user."""
        return _chunk(await self._tools().arecall_entity(name, limit))

    async def add_memory(self, content: str) -> ToolChunk:
        """The ``add_memory`` tool: `MemoryTools.add_memory` for this middleware's user."""
        return _chunk(await self._tools().aadd_memory(content))

    async def update_memory(self, memory_id: str, content: str) -> ToolChunk:
        """The ``update_memory`` tool: `MemoryTools.update_memory` for this middleware's user."""
        return _chunk(await self._tools().aupdate_memory(memory_id, content))

    async def delete_memory(self, memory_id: str) -> ToolChunk:
        """The ``delete_memory`` tool: `MemoryTools.delete_memory` for this middleware's user."""
        return _chunk(await self._tools().adelete_memory(memory_id))

    def _tool_agent(self) -> str:
        """The agent id the tools save under and search in: the same one automatic recall uses."""
        return self.config.resolve_agent(default=self._agent_name)


# -- helpers -----------------------------------------------------------------------------------------

def _team_leader() -> str | None:
    """The leader's name when the running reply is a ``TeamPipeline`` member's assignment.

    AgentScope hands a member its task as ``UserMsg(name="user")``, indistinguishable from the
    human's own message; the pipeline's assignment runner (``run_group`` inside
    ``TeamPipeline._run_assignments``) is on the call stack then, and knows the leader."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "run_group" and "_team_pipeline" in code.co_filename:
            leader = getattr(frame.f_locals.get("self"), "leader", None)
            name = getattr(leader, "name", None)
            return name if isinstance(name, str) and name else "leader"
        frame = frame.f_back
    return None


def _outcome(final: Msg, tools: list[dict[str, Any]]) -> Outcome:
    """The outcome of the run a reply ends: AgentScope's ``finished_reason`` "error" or
    "exceed_max_iters" (the loop was cut at ``max_iters``) fail it, "interrupted" leaves it
    unknown (the user stopped it: it neither succeeded nor failed), and a completed reply takes the
    outcome of its tool calls (`_outcome.turn_outcome`)."""
    reason = str(getattr(final, "finished_reason", None) or "")
    if reason == "interrupted":
        return "unknown"
    return turn_outcome(tools, failed=reason in ("error", "exceed_max_iters"))


def _query_of(inputs: Any) -> tuple[str, str | None, str | None]:
    """The text of the user's input messages, the id of the last of them ("" for resumption
    events and inputs without user text), and their team key (`ids_key`)."""
    if inputs is None:
        return "", None, None
    messages = [m for m in (inputs if isinstance(inputs, list) else [inputs]) if isinstance(m, Msg)]
    lines = [Line(m.role, m.name, m.get_text_content() or "") for m in messages]
    last = latest_user_index(lines)
    said = [m for m, line in zip(messages, lines) if holds_users_words(line)]
    key = ids_key("agentscope", said)
    return latest_user_text(lines, whole_input=True), None if last is None else messages[last].id, key


def _with_memory(messages: list[Any], block: str, input_id: str | None) -> list[Any]:
    """A new message list with the memory message right after the user's input (or after the last
    user message, or after the system prompt)."""
    note = AssistantMsg(name=MEMORY_MSG_NAME, content=[HintBlock(hint=block)])
    position = None
    for index, message in enumerate(messages):
        if isinstance(message, Msg) and input_id is not None and message.id == input_id:
            position = index + 1
    if position is None:
        for index, message in enumerate(messages):
            if isinstance(message, Msg) and message.role == "user":
                position = index + 1
    if position is None:
        position = 1 if messages and isinstance(messages[0], Msg) and messages[0].role == "system" else 0
    return [*messages[:position], note, *messages[position:]]


def _chunk(text: str, *, error: bool = False) -> ToolChunk:
    if error:
        return ToolChunk(content=[TextBlock(type="text", text=text)], state=ToolResultState.ERROR)
    return ToolChunk(content=[TextBlock(type="text", text=text)])
