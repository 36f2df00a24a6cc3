"""Long-term memory for AutoGen AgentChat 0.7 (``autogen_agentchat`` / ``autogen_core``).

Usage::

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory, run_with_memory

    memory = MemoryScopeMemory(engine, user_id="anna")
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
    result = await run_with_memory(agent, "Where do I live?")   # retrieves, answers, records

``MemoryScopeMemory`` implements ``autogen_core.memory.Memory``: ``AssistantAgent`` calls its
``update_context`` before answering; it retrieves for the latest user message and adds the
memories as one SystemMessage. That message is removed again when the turn ends (by
`run_with_memory`, `run_stream_with_memory` or `MemoryAssistantAgent`) or, with a bare
``AssistantAgent``, at the start of the next ``update_context``: memory blocks never pile up in
the agent's model context.

``AssistantAgent`` never writes to a memory. Recording the exchange is done by
`run_with_memory` / `run_stream_with_memory` (any agent) or by using `MemoryAssistantAgent`
(an ``AssistantAgent`` that records each turn itself, also inside teams), or by calling
`MemoryScopeMemory.record_exchange` yourself. The agent's tool calls of a turn (its
``ToolCallRequestEvent``s with the ``ToolCallExecutionEvent`` results) are recorded with the turn, as
the agent's (`MemoryScope.tool_stats`), never as the user's memories, and the turn ends the agent's
run with the outcome its calls give (`_outcome`); a `MemoryAssistantAgent` turn that raises ends it
as failed.

The component is serialisable (``dump_component`` / ``load_component``): its config holds the
store location and the engine's non-secret settings, the user, agent and options; API keys
come from the environment (``MEMORYSCOPE_*``) when it is loaded, never from the dump.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Literal

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent, Response, TaskResult
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    MultiModalMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_core import CancellationToken, Component
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import SystemMessage, UserMessage
from pydantic import BaseModel, Field, SecretStr
from typing_extensions import Self

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.settings import Settings
from memoryscope_plugins.types import MemoryType, ScoredMemory
from memoryscope_plugins.validation import check_top_k

from ._common import (
    DEFAULT_TEMPLATE,
    CallSeen,
    Line,
    MemoryBridge,
    MemoryConfig,
    ResultSeen,
    latest_user_text,
    procedure_ids,
    text_of,
    turn,
    turn_outcome,
)
from ._team_keys import ids_key

__all__ = ["MemoryAssistantAgent", "MemoryScopeMemory", "MemoryScopeMemoryConfig", "memory_tools",
           "run_stream_with_memory", "run_with_memory"]


class MemoryScopeMemoryConfig(BaseModel):
    """The serialisable configuration of `MemoryScopeMemory` (no engine object, no secrets)."""

    name: str = "memoryscope"
    user_id: str
    agent_id: str | None = None
    top_k: int | None = Field(None, gt=0, le=1000)
    types: list[str] | None = None
    min_relevance: float | None = Field(None, ge=-1, le=1)
    human_names: list[str] = Field(default_factory=list)
    template: str = DEFAULT_TEMPLATE
    scope_to_agent: bool = False
    on_error: Literal["warn", "raise"] = "warn"
    path: str | None = Field(None, description="the SQLite store file (settings.store.path)")
    settings_file: str | None = Field(None, description="a YAML settings file")
    settings: dict[str, Any] | None = Field(None, description="non-secret settings overrides")


class MemoryScopeMemory(Memory, Component[MemoryScopeMemoryConfig]):
    """A MemoryScope user's long-term memory as an AgentChat ``Memory``.

    Args:
        memory: the engine; when omitted, one is built from `path` / `settings_file` /
            `settings` (and the environment) and closed by `close`.
        user_id: whose memories are read, written and cleared.
        agent_id: recorded as the assistant (default ``"assistant"``, or the agent's name when
            recorded through `run_with_memory` / `MemoryAssistantAgent`); with ``procedures.enabled``
            the procedures retrieved are that agent's (see `serve`).
        top_k: memories injected per model call (default: the engine's setting).
        types: only these memory types are retrieved.
        template: the memory block (must contain ``{context}``).
        scope_to_agent: retrieve only memories recorded by `agent_id`.
        on_error: ``"warn"`` (a failing backend means no memories, the agent still answers) or
            ``"raise"``.
        name: the component's name.
        min_relevance: relevance floor (default: the engine's ``retrieval.min_relevance``).
        human_names: message sources that are the human, besides ``"user"`` (the source AgentChat
            gives a task string; a ``UserProxyAgent``'s name is also a good entry). In a team, every
            other source is another agent and is recorded under its own name.
    """

    component_type = "memory"
    component_config_schema = MemoryScopeMemoryConfig
    component_provider_override = "memoryscope_plugins.adapters.autogen_agentchat.MemoryScopeMemory"

    def __init__(self, memory: MemoryScope | None = None, *, user_id: str, agent_id: str | None = None,
                 top_k: int | None = None, types: Sequence[MemoryType | str] | None = None,
                 template: str = DEFAULT_TEMPLATE, scope_to_agent: bool = False,
                 on_error: Literal["warn", "raise"] = "warn", name: str = "memoryscope",
                 path: str | None = None, settings_file: str | None = None,
                 settings: dict[str, Any] | None = None, min_relevance: float | None = None,
                 human_names: Sequence[str] = ()) -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("user_id must be a non-empty string")
        if scope_to_agent and not agent_id:
            raise ValueError("scope_to_agent=True needs an agent_id")
        if memory is not None and (path or settings_file or settings):
            raise ValueError("give either an engine, or path / settings_file / settings to build one, not both")
        self._owns_engine = memory is None
        if memory is None:
            base = Settings.load(settings_file, **(settings or {})) if (settings_file or settings) else None
            memory = MemoryScope(base, path=path)
        self._settings_file = settings_file
        self._name = name
        self._config = MemoryConfig(user_id=user_id, agent_id=agent_id, top_k=top_k, types=types,
                                    template=template, scope_to_agent=scope_to_agent, on_error=on_error,
                                    min_relevance=min_relevance, human_names=human_names)
        self._bridge = MemoryBridge(memory, self._config, "autogen_agentchat")
        self._used: list[str] = []  # the procedures the latest update_context returned (for the run's end)
        # the name of the agent this memory serves now (`MemoryAssistantAgent`, `run_with_memory`): the
        # Memory protocol's update_context is not told which agent calls it, and its procedures are
        # that agent's, the one its runs are recorded under
        self._serving: str | None = None

    # -- properties ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The component's name."""
        return self._name

    @property
    def engine(self) -> MemoryScope:
        """The MemoryScope engine behind this memory."""
        return self._bridge.memory

    @property
    def user_id(self) -> str:
        """Whose memories this is."""
        user_id = self._config.user_id
        assert isinstance(user_id, str)  # __init__ takes a non-empty string only
        return user_id

    @property
    def agent_id(self) -> str:
        """The agent id recorded with the assistant's messages."""
        return self._config.resolve_agent()

    # -- the Memory protocol -----------------------------------------------------------------------
    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Inject memories relevant to the latest user message as one SystemMessage.

        The block goes to the head of the context, right after the agent's own system message:
        model clients that accept a single system message (``multiple_system_messages`` unset,
        the default for models AutoGen does not know) merge consecutive system messages but
        refuse one in the middle of the conversation. A windowed context that would hide the
        head (``BufferedChatCompletionContext``) gets the block at the end instead. Any block
        left from an earlier turn is removed first, so the context holds at most one. Never
        raises with ``on_error="warn"``.
        """
        await self.remove_blocks(model_context)
        query = latest_user_text([_line(m) for m in await model_context.get_messages()])
        result = await self._bridge.aretrieve(self.user_id, query, agent_id=self._turn_agent())
        self._used = procedure_ids([result])
        block = self._bridge.block(result)
        if block:
            state = dict(await model_context.save_state())
            state["messages"] = [SystemMessage(content=block).model_dump(), *state.get("messages", [])]
            await model_context.load_state(state)
            visible = await model_context.get_messages()
            if not any(_is_system(m) and self._config.is_block(_field(m, "content")) for m in visible):
                await self.remove_blocks(model_context)
                await model_context.add_message(SystemMessage(content=block))
        return UpdateContextResult(memories=MemoryQueryResult(results=[_content(m) for m in result.memories]))

    async def query(self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None,
                    **kwargs: Any) -> MemoryQueryResult:
        """Search this user's memories (``limit=`` or ``top_k=`` may be passed); each result
        carries metadata id, type, time and score."""
        text = query if isinstance(query, str) else _content_text(query)
        limit = kwargs.get("limit", kwargs.get("top_k"))
        if limit is not None:
            check_top_k(limit, "limit")
        result = await self._bridge.aretrieve(self.user_id, text, agent_id=self._turn_agent(), top_k=limit)
        return MemoryQueryResult(results=[_content(m) for m in result.memories])

    def _turn_agent(self) -> str:
        """The agent a retrieval is for: the configured agent_id, else the agent this memory serves
        (as `record_messages` records the turn), else "assistant"."""
        return self._config.resolve_agent(default=self._serving)

    def serve(self, agent_name: str | None) -> None:
        """Say which agent this memory serves from now on (its retrievals return that agent's
        procedures); `MemoryAssistantAgent` and `run_with_memory` call it before each turn."""
        self._serving = agent_name if isinstance(agent_name, str) and agent_name.strip() else None

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """Store a fact directly (a ``custom`` memory, searchable at once). Text and JSON only."""
        await self.engine.aadd(self.user_id, _content_text(content), agent_id=self.agent_id,
                               metadata=dict(content.metadata or {}))

    async def clear(self) -> None:
        """Delete every memory of this user (and of nobody else)."""
        await self.engine.adelete_all(self.user_id)

    async def close(self) -> None:
        """Close the engine if this memory built it (an engine passed in stays open)."""
        if self._owns_engine:
            await self.engine.aclose()

    # -- recording and cleaning up ----------------------------------------------------------------
    async def record_exchange(self, user_text: str | None, reply_text: str | None, *,
                              agent_id: str | None = None) -> list[str]:
        """Record one exchange (either side may be empty); failures are logged, not raised.

        The assistant side is recorded under the configured agent_id, else `agent_id` (the
        running agent's name), else "assistant"."""
        agent = self._config.resolve_agent(default=agent_id)
        return await self._bridge.arecord(self.user_id, turn(user_text, reply_text, agent_name=agent),
                                          agent_id=agent)

    async def record_messages(self, messages: Sequence[BaseChatMessage], reply: BaseChatMessage | None, *,
                              agent_id: str | None = None, events: Sequence[Any] = ()) -> list[str]:
        """Record what an agent received and its reply, each speaker as who they are, with the
        agent's tool calls of the turn.

        A message whose ``source`` is the human (``"user"`` or one of `human_names`) is the
        user's; any other source is another agent and its words are recorded under that agent's
        name (role assistant), never as the user's. The agent's own earlier messages are skipped.
        A ``MultiModalMessage`` records its text parts only (images alone: no words).
        `events` are the turn's events (``ToolCallRequestEvent`` / ``ToolCallExecutionEvent``...):
        the calls whose ``source`` is the agent (`agent_id`, the running agent's name) are recorded
        as its tool calls with their results, paired by call id. With a `reply` the turn ends the
        agent's run (`_outcome.turn_outcome` of its calls), with the procedures the latest
        `update_context` returned as the ones it used."""
        agent = self._config.resolve_agent(default=agent_id)
        own = {agent, agent_id}
        rows: list[dict[str, Any]] = []
        for message in messages:
            if message.source in own:
                continue
            text = _message_text(message)
            if self.is_human(message.source):
                rows.extend(turn(text, None, user_key=ids_key("agentchat", [message])))
            else:
                rows.extend(turn(None, text, agent_name=message.source, reply_key=ids_key("agentchat", [message])))
        tools = self._tool_rows(events, {agent_id or agent})
        rows.extend(tools)
        if reply is None:
            return await self._bridge.arecord(self.user_id, rows, agent_id=agent)
        rows.extend(turn(None, _message_text(reply), agent_name=reply.source or agent,
                         reply_key=ids_key("agentchat", [reply])))
        used, self._used = self._used, []
        return await self._bridge.arecord(self.user_id, rows, agent_id=agent, run_outcome=turn_outcome(tools),
                                          procedures_used=used)

    async def record_failed(self, events: Sequence[Any], *, agent_id: str | None = None) -> list[str]:
        """End the agent's run as failed after its turn raised: the tool calls among `events` (as
        `record_messages` reads them; one requested and never answered with status ``unknown``) are
        recorded, never the user's words (the turn gave no reply)."""
        agent = self._config.resolve_agent(default=agent_id)
        used, self._used = self._used, []
        tools = self._tool_rows(events, {agent_id or agent}, keep_unanswered=True)
        return await self._bridge.arecord_failed(self.user_id, tools, agent_id=agent, procedures_used=used)

    def _tool_rows(self, events: Sequence[Any], sources: set[str], *,
                   keep_unanswered: bool = False) -> list[dict[str, Any]]:
        """The tool messages of the calls in `events` made by `sources` (the agent); a call not
        answered among them is left out, or with `keep_unanswered` recorded as ``unknown``."""
        calls: list[CallSeen] = []
        results: list[ResultSeen] = []
        for event in events:
            if getattr(event, "source", None) not in sources:
                continue
            if isinstance(event, ToolCallRequestEvent):
                calls += [CallSeen(c.name, c.arguments, c.id or None) for c in event.content]
            elif isinstance(event, ToolCallExecutionEvent):
                results += [ResultSeen(r.call_id or None, r.content, failed=bool(r.is_error), name=r.name)
                            for r in event.content]
        return self._bridge.tool_messages(calls, results, keep_unanswered=keep_unanswered) if calls else []

    def is_human(self, source: str | None) -> bool:
        """Whether a message source is the human (``"user"`` or one of `human_names`)."""
        return source == "user" or source in self._config.human_names

    async def remove_blocks(self, model_context: ChatCompletionContext) -> int:
        """Remove this memory's blocks from a model context; returns how many were removed."""
        state = dict(await model_context.save_state())
        messages = list(state.get("messages", []))
        kept = [m for m in messages if not (_is_system(m) and self._config.is_block(_field(m, "content")))]
        if len(kept) != len(messages):
            state["messages"] = kept
            await model_context.load_state(state)
        return len(messages) - len(kept)

    # -- serialisation ----------------------------------------------------------------------------
    def _to_config(self) -> MemoryScopeMemoryConfig:
        cfg = self._config
        return MemoryScopeMemoryConfig(
            name=self._name, user_id=self.user_id, agent_id=cfg.agent_id if isinstance(cfg.agent_id, str) else None,
            top_k=cfg.top_k, types=list(cfg.types) if cfg.types else None, template=cfg.template,
            scope_to_agent=cfg.scope_to_agent, on_error=cfg.on_error, path=None, settings_file=self._settings_file,
            settings=_public_settings(self.engine.settings), min_relevance=cfg.min_relevance,
            human_names=list(cfg.human_names))

    @classmethod
    def _from_config(cls, config: MemoryScopeMemoryConfig) -> Self:
        return cls(user_id=config.user_id, agent_id=config.agent_id, top_k=config.top_k, types=config.types,
                   template=config.template, scope_to_agent=config.scope_to_agent, on_error=config.on_error,
                   name=config.name, path=config.path, settings_file=config.settings_file, settings=config.settings,
                   min_relevance=config.min_relevance, human_names=config.human_names)


class MemoryAssistantAgent(AssistantAgent):
    """An ``AssistantAgent`` that also records every turn into its `MemoryScopeMemory` memories
    (the incoming messages and its final answer) and removes the memory block from its model
    context when the turn ends. Works wherever the agent runs: ``run``, ``run_stream``,
    ``on_messages`` or inside a team. Takes exactly ``AssistantAgent``'s arguments."""

    component_provider_override = "memoryscope_plugins.adapters.autogen_agentchat.MemoryAssistantAgent"

    async def on_messages_stream(self, messages: Sequence[BaseChatMessage],
                                 cancellation_token: CancellationToken
                                 ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | Response, None]:
        """``AssistantAgent.on_messages_stream`` plus recording before the `Response` is yielded
        (``on_messages`` stops reading at the Response, so nothing after it would run)."""
        memories = _scope_memories(self)
        for memory in memories:
            memory.serve(self.name)
        stream = super().on_messages_stream(messages, cancellation_token)
        seen: list[Any] = []  # the turn's events so far: a turn that raises ends its run with its calls
        while True:
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                return
            except Exception:
                for memory in memories:
                    await memory.record_failed(seen, agent_id=self.name)
                raise
            if isinstance(item, Response):
                for memory in memories:
                    await _finish_turn(memory, self, messages, item.chat_message, item.inner_messages or ())
            elif isinstance(item, BaseAgentEvent):
                seen.append(item)
            yield item


async def run_with_memory(agent: ChatAgent, task: str | BaseChatMessage | Sequence[BaseChatMessage],
                          memory: MemoryScopeMemory | None = None, *,
                          cancellation_token: CancellationToken | None = None) -> TaskResult:
    """Run `agent` on `task`, then record the task and the agent's final answer in `memory`
    (default: the agent's `MemoryScopeMemory`) and remove the memory block from its context."""
    memories = [memory] if memory is not None else _scope_memories(agent)
    if not memories:
        raise ValueError("no MemoryScopeMemory given and none found in the agent's memory list")
    _serve_members(agent)
    result = await agent.run(task=task, cancellation_token=cancellation_token)
    await _record_run(memories, agent, task, result)
    return result


async def run_stream_with_memory(agent: ChatAgent, task: str | BaseChatMessage | Sequence[BaseChatMessage],
                                 memory: MemoryScopeMemory | None = None, *,
                                 cancellation_token: CancellationToken | None = None
                                 ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | TaskResult, None]:
    """`run_with_memory` as a stream: yields what ``agent.run_stream`` yields; the exchange is
    recorded before the final `TaskResult` is yielded, so a consumer that stops there loses
    nothing."""
    memories = [memory] if memory is not None else _scope_memories(agent)
    if not memories:
        raise ValueError("no MemoryScopeMemory given and none found in the agent's memory list")
    _serve_members(agent)
    async for item in agent.run_stream(task=task, cancellation_token=cancellation_token):
        if isinstance(item, TaskResult):
            await _record_run(memories, agent, task, item)
        yield item


def memory_tools(memory: MemoryScopeMemory, *, update: bool = True, delete: bool = True,
                 min_relevance: float | None = None) -> list[Any]:
    """Memory tools for an agent, as ``autogen_core`` ``FunctionTool`` objects scoped to the
    memory's user: ``search_memory``, ``add_memory`` and (unless turned off) ``update_memory`` and
    ``delete_memory``. Give them to ``AssistantAgent(tools=...)`` or a ``StaticWorkbench``."""
    from autogen_core.tools import FunctionTool

    from ._tools import MemoryTools, tool_names, tool_spec
    if not isinstance(memory, MemoryScopeMemory):
        raise TypeError("memory_tools needs a MemoryScopeMemory")
    cfg = memory._config
    tools = MemoryTools(memory.engine, user_id=memory.user_id, agent_id=memory.agent_id,
                        scope_to_agent=cfg.scope_to_agent,
                        min_relevance=cfg.min_relevance if min_relevance is None else min_relevance)
    return [FunctionTool(getattr(tools, f"a{name}"), description=tool_spec(name).description, name=name)
            for name in tool_names(update=update, delete=delete)]


# -- helpers -------------------------------------------------------------------------------------------

async def _record_run(memories: Sequence[MemoryScopeMemory], agent: ChatAgent | Any,
                      task: str | BaseChatMessage | Sequence[BaseChatMessage], result: TaskResult) -> None:
    """Record a finished run: for a single agent, the task and its final answer; for a team, the
    whole transcript, each exchange under the agent that answered it."""
    from autogen_agentchat.teams import BaseGroupChat
    if isinstance(agent, MemoryAssistantAgent):
        return  # it records its own turns
    if not isinstance(agent, BaseGroupChat):
        for memory in memories:
            await _finish_turn(memory, agent, _task_messages(task), _final_reply(result, agent.name), result.messages)
        return
    for memory in memories:
        pending: list[BaseChatMessage] = []
        events: list[BaseAgentEvent] = []  # the tool calls and results before the agent's message
        for message in result.messages:
            if not isinstance(message, BaseChatMessage):
                events.append(message)
            elif memory.is_human(message.source):
                pending.append(message)
            else:
                await memory.record_messages(pending, message, agent_id=message.source, events=events)
                pending, events = [], []
        if pending:
            await memory.record_messages(pending, None)


async def _finish_turn(memory: MemoryScopeMemory, agent: Any, inputs: Sequence[BaseChatMessage],
                       reply: BaseChatMessage | None, events: Sequence[Any] = ()) -> None:
    await memory.record_messages(inputs, reply, agent_id=getattr(agent, "name", None), events=events)
    context = getattr(agent, "model_context", None)
    if isinstance(context, ChatCompletionContext):
        await memory.remove_blocks(context)


def _serve_members(agent: Any) -> None:
    """Tell each memory in the agent's memory list (a team's: each member's) which agent it serves. A
    memory two members of a team share serves neither: its retrievals return the configured agent_id's
    procedures (default "assistant"); give each member its own memory, or use `MemoryAssistantAgent`,
    which says so before each of its turns."""
    members = getattr(agent, "_participants", None)  # a team's (BaseGroupChat keeps them there)
    holders: dict[int, tuple[MemoryScopeMemory, set[str]]] = {}
    for member in members if isinstance(members, list) else [agent]:
        for memory in _scope_memories(member):
            holders.setdefault(id(memory), (memory, set()))[1].add(getattr(member, "name", ""))
    for memory, names in holders.values():
        memory.serve(next(iter(names)) if len(names) == 1 else None)


def _scope_memories(agent: Any) -> list[MemoryScopeMemory]:
    return [m for m in (getattr(agent, "_memory", None) or []) if isinstance(m, MemoryScopeMemory)]


def _task_messages(task: str | BaseChatMessage | Sequence[BaseChatMessage]) -> list[BaseChatMessage]:
    from autogen_agentchat.messages import TextMessage
    if isinstance(task, str):
        return [TextMessage(content=task, source="user")]
    if isinstance(task, BaseChatMessage):
        return [task]
    return list(task)


def _final_reply(result: TaskResult, name: str) -> BaseChatMessage | None:
    for message in reversed(result.messages):
        if isinstance(message, BaseChatMessage) and message.source == name:
            return message
    return None


def _message_text(message: BaseChatMessage) -> str:
    """The words of a message: a ``MultiModalMessage``'s string parts, one per line ("" for images
    alone: ``to_model_text`` would put "[image]" where each image is, as if someone had said it),
    as `_line` reads a ``UserMessage`` for retrieval; any other message's model text."""
    if isinstance(message, MultiModalMessage):
        return "\n".join(part for part in message.content if isinstance(part, str))
    try:
        return message.to_model_text()
    except Exception:  # noqa: BLE001 - an exotic message type: take what text it has
        return text_of(getattr(message, "content", None))


def _line(message: Any) -> Line:
    """A model-context message in the adapters' common shape: a ``UserMessage`` is the user's
    (its text parts; images left out)."""
    if not isinstance(message, UserMessage):
        return Line("other", None, "")
    content = message.content
    text = content if isinstance(content, str) else "\n".join(p for p in content if isinstance(p, str))
    return Line("user", message.source, text)


def _is_system(message: Any) -> bool:
    return _field(message, "type") == "SystemMessage" or isinstance(message, SystemMessage)


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _content(item: ScoredMemory) -> MemoryContent:
    memory = item.memory
    return MemoryContent(content=memory.content, mime_type=MemoryMimeType.TEXT, metadata={
        "id": memory.id, "type": memory.type.value, "score": item.score,
        "created_at": memory.created_at.isoformat(),
        "event_start": memory.event_start.isoformat() if memory.event_start else None,
        "speaker": memory.speaker})


def _content_text(content: MemoryContent) -> str:
    value = content.content
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError("MemoryScopeMemory stores text and JSON content only")


def _public_settings(settings: Settings) -> dict[str, Any]:
    """The engine's settings that differ from the defaults, secrets left out (they come from the
    environment when the component is loaded)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not isinstance(v, SecretStr)}
        return value
    raw = strip(settings.model_dump(exclude_defaults=True))
    return json.loads(json.dumps(raw, default=str))
