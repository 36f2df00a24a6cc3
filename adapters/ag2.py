"""Long-term memory for ag2 1.x agents (`ag2.Agent`), as a middleware, a plugin and tools.

Usage::

    from ag2 import Agent
    from memoryscope_plugins.adapters.ag2 import MemoryScopePlugin

    agent = Agent("assistant", "You are helpful.", config=config,
                  plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await agent.ask("Where do I live?")

ag2 1.x (the rewrite with the ``ag2`` import name) has no ``ConversableAgent`` and no reply
functions; its extension point is middleware: a factory called once per turn with the turn's
first event and context, returning a ``BaseMiddleware`` whose ``on_turn`` wraps the whole turn,
``on_llm_call`` each model call, ``on_tool_execution`` each tool call and ``on_human_input``
each question put to the human. `MemoryScopeMiddleware` is such a factory:

- ``on_turn``: retrieves for the human's message before the turn, records the exchange after it.
- ``on_llm_call``: adds the memory block to the system prompt of each model call of the turn
  (the way ag2's own ``EpisodicMemoryPolicy`` / ``WorkingMemoryPolicy`` inject memory), restored
  right after the call: the stream's history never holds it.
- ``on_human_input``: keeps what the agent asked the human in mid-turn and what they answered.
- ``on_tool_execution``: marks tool calls as made by this agent, so another agent run inside a
  tool (``agent.as_tool(...)``, a delegation) records its task as this agent's words, not the
  human's; and keeps each call with its result (or error) and duration, recorded with the turn
  as the agent's tool calls (`MemoryScope.tool_stats`), never as the user's memories.

`MemoryScopePlugin` bundles the middleware with (optionally) the memory tools and their
instructions, as an ``ag2.Plugin``; `memory_tools` gives the tools alone.

The user: ``user_id=`` (a string, or a callable of the turn's ``Context``), else the turn's
``variables["user_id"]`` (``agent.ask(..., variables={"user_id": "anna"})``), so one agent can
serve many people. With neither, memory is skipped for that turn (one warning).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NamedTuple

from pydantic import Field

try:
    from ag2 import Context, Plugin
    from ag2.events import (
        BaseEvent,
        HumanInputRequest,
        HumanMessage,
        ModelRequest,
        ModelResponse,
        TextInput,
        ToolCallEvent,
        ToolErrorEvent,
        ToolResultEvent,
    )
    from ag2.events.types import ToolApprovalRequest
    from ag2.middleware import BaseMiddleware, MiddlewareDescription
    from ag2.tools import tool
    from ag2.utils import AGENT_CONTEXT_DEPENDENCY_KEY
except ImportError as exc:
    raise ImportError("the ag2 adapter needs ag2 1.x (the `ag2` package with `ag2.Agent`): "
                      "pip install 'memoryscope-plugins[ag2]'. For ag2 0.x (`import autogen`, "
                      "ConversableAgent) use memoryscope_plugins.adapters.autogen_classic.") from exc

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.types import MemoryType

from . import _team_keys as team_keys
from ._common import (
    DEFAULT_TEMPLATE,
    CallSeen,
    Line,
    MemoryBridge,
    MemoryConfig,
    OnError,
    Outcome,
    ResultSeen,
    latest_user_text,
    log,
    procedure_ids,
    text_of,
    turn,
    turn_outcome,
)
from ._outcome import CUT_OFF
from ._tools import MemoryTools, tool_names, tool_spec

__all__ = ["DEFAULT_TOOL_INSTRUCTIONS", "SPEAKER_VARIABLE", "USER_VARIABLE", "MemoryScopeMiddleware",
           "MemoryScopePlugin", "memory_tools"]

#: The context variable read for the user when ``user_id`` is not given.
USER_VARIABLE = "user_id"

#: The context variable naming who said a turn's input when it is not the human: set by this
#: middleware while its agent runs tools (so a delegated agent knows its task is that agent's
#: words), or by the caller (``variables={SPEAKER_VARIABLE: "planner"}``) when passing another
#: agent's words by hand. A name in ``human_names`` means the human.
SPEAKER_VARIABLE = "memoryscope_speaker"

#: The dependencies `ag2.network` sets on a turn it runs for a channel message (the values of
#: ``ag2.network.CHANNEL_DEP``, ``AGENT_CLIENT_DEP`` and ``HUB_DEP``; spelled out so that this
#: module does not import the network package).
_NETWORK_CHANNEL = "ag2.network.channel"
_NETWORK_CLIENT = "ag2.network.agent_client"
_NETWORK_HUB = "ag2.network.hub"

#: `MemoryScopeMiddleware.who_said`'s answer for the human (an object: no agent name can equal it).
HUMAN: Any = type("Human", (), {"__repr__": lambda self: "HUMAN"})()

#: The system-prompt section that tells the model about the memory tools (``tools=True``).
DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have the `search_memory`, `recall_entity`, `add_memory`, `update_memory` and `delete_memory` tools. "
    "Search when the answer may depend on what the user told you in earlier conversations; recall what is "
    "known about a person, place or thing the user names (or the user: \"me\"); add durable facts "
    "about the user (preferences, plans, people, events) that will matter later; update or delete a "
    "memory that is wrong or that the user asks you to forget."
)

UserSource = str | Callable[[Any], str | None] | None


class MemoryScopeMiddleware:
    """Long-term memory for an ag2 1.x ``Agent``: an ag2 middleware factory.

    Pass it as ``Agent(..., middleware=[mw])`` (or ``agent.ask(..., middleware=[mw])`` for one
    call), or use `MemoryScopePlugin`, which also gives the memory tools.

    Args:
        memory: the engine.
        user_id: whose memories: a string, or ``callable(context) -> str | None`` called with the
            turn's ``ag2.Context``. Default: the turn's ``variables["user_id"]``.
        agent_id: recorded as the assistant; default: the agent's name.
        top_k: memories injected per turn (default: the engine's setting).
        types: restrict retrieval to these memory types.
        template: the memory block (must contain ``{context}``).
        scope_to_agent: retrieve only memories recorded by this agent id.
        on_error: ``"warn"`` (a failing backend means no memories; the agent still answers) or
            ``"raise"``.
        min_relevance: relevance floor (default: the engine's ``retrieval.min_relevance``).
        human_names: speaker names (see `SPEAKER_VARIABLE`) that are the human.
        session_id: recorded with each message; default: the ag2 stream id (one per conversation).
        config: a full `MemoryConfig` instead of the options above.
    """

    def __init__(self, memory: MemoryScope, *, user_id: UserSource = None, agent_id: str | None = None,
                 top_k: int | None = None, types: Sequence[MemoryType | str] | None = None,
                 template: str = DEFAULT_TEMPLATE, scope_to_agent: bool = False, on_error: OnError = "warn",
                 min_relevance: float | None = None, human_names: Sequence[str] = (),
                 session_id: str | None = None, config: MemoryConfig | None = None) -> None:
        if config is None:
            config = MemoryConfig(user_id=user_id, agent_id=agent_id, top_k=top_k, types=types, template=template,
                                  scope_to_agent=scope_to_agent, on_error=on_error, min_relevance=min_relevance,
                                  human_names=human_names, session_id=session_id)
        elif not isinstance(config, MemoryConfig):
            raise TypeError(f"config must be a MemoryConfig, not {type(config).__name__}")
        self.config = config
        self.bridge = MemoryBridge(memory, config, "ag2")
        self._explicit_session = config.session_id is not None
        self._warned_no_user = False

    def __call__(self, event: BaseEvent, context: Context) -> BaseMiddleware:
        """The middleware for one turn (ag2 calls this once per turn)."""
        return _MemoryTurn(event, context, owner=self)

    def describe(self) -> MiddlewareDescription:
        """What ag2 shows in ``agent.middleware``: the options, never the engine or a user callable."""
        config = self.config
        return MiddlewareDescription(kind=type(self).__qualname__, config={
            "user_id": config.user_id if isinstance(config.user_id, str) else None,
            "agent_id": config.agent_id if isinstance(config.agent_id, str) else None,
            "top_k": config.top_k, "types": config.types, "scope_to_agent": config.scope_to_agent,
            "on_error": config.on_error, "min_relevance": config.min_relevance,
            "human_names": config.human_names}, complete=not callable(config.user_id))

    # -- who is who --------------------------------------------------------------------------------
    async def resolve_user(self, context: Context, sender: str | None = None) -> str | None:
        """The user of this turn: ``user_id``, else ``variables["user_id"]``, else in an ag2.network
        channel the human who sent the message (`sender`) or the channel's one human; None skips
        memory (one warning)."""
        try:
            user = self.config.resolve_user(context) if self.config.user_id is not None else None
        except Exception as exc:  # noqa: BLE001 - a user-supplied callable failed: no memory this turn
            self.bridge.report_failure("id resolution", "?", exc)
            return None
        if user is None:
            variable = context.variables.get(USER_VARIABLE)
            user = variable if isinstance(variable, str) and variable.strip() else sender
        if user is None and context.dependencies.get(_NETWORK_HUB) is not None:
            user = await _channel_human(context)
        if user is None and not self._warned_no_user:
            self._warned_no_user = True
            log.warning("ag2: no user for this turn (give user_id= or variables={'user_id': ...}); "
                        "memory is skipped")
        return user

    def resolve_agent(self, context: Context) -> str:
        """This agent's id: ``agent_id``, else the ag2 agent's name, else "assistant"."""
        agent = context.dependencies.get(AGENT_CONTEXT_DEPENDENCY_KEY)
        name = getattr(agent, "name", None)
        return self.config.resolve_agent(default=name if isinstance(name, str) and name.strip() else None)

    def session(self, context: Context) -> str:
        """The session recorded with messages: ``session_id``, else the ag2 stream's id."""
        if self._explicit_session:
            return self.config.session
        stream_id = getattr(context.stream, "id", None)
        return str(stream_id) if stream_id else self.config.session

    async def who_said(self, context: Context, said: str) -> Said:
        """Who said this turn's input (`said`), and what exactly (`Said`).

        The speaker is `HUMAN`, another agent's name, or None when nobody can tell (a channel
        message whose sender is not found): such an input is not recorded. It comes from
        `SPEAKER_VARIABLE`, else, in an ag2.network channel, from the sender's passport (kind
        ``"human"`` or an agent), else it is the human."""
        named = context.variables.get(SPEAKER_VARIABLE)
        if isinstance(named, str) and named.strip():
            return Said(HUMAN if named in self.config.human_names else named, None, said)
        if context.dependencies.get(_NETWORK_HUB) is None:
            return Said(HUMAN, None, said)
        posted = await _channel_sender(context, said)
        if posted is None:
            return Said(None, None, said)
        # a channel of three or more shows each message as "[sender]: text": the words are the text
        words = posted.text if said.strip() in (posted.text.strip(), f"[{posted.name}]: {posted.text.strip()}") \
            else said
        if posted.kind == "human" or posted.name in self.config.human_names:
            return Said(HUMAN, posted.name, words, posted.key, posted.answering)
        return Said(posted.name, None, words, posted.key, posted.answering)


class _MemoryTurn(BaseMiddleware):
    """The middleware of one turn: retrieval before, the block in each model call, recording after."""

    def __init__(self, event: BaseEvent, context: Context, *, owner: MemoryScopeMiddleware) -> None:
        super().__init__(event, context)
        self.owner = owner
        self.block = ""
        self.asked: list[dict[str, Any]] = []  # questions put to the human in mid-turn, and the answers
        self.tools_running = 0
        self.saved_speaker: Any = None
        self.calls: list[tuple[CallSeen, ResultSeen]] = []  # the turn's tool calls with their results

    async def on_turn(self, call_next: Any, event: BaseEvent, context: Context) -> ModelResponse:
        owner = self.owner
        who = await owner.who_said(context, _request_text(event))  # "" when the turn resumes from tool results
        said, sender = who.words, who.sender
        user_id = await owner.resolve_user(context, sender)
        if user_id is None:
            return await call_next(event, context)
        agent_id = owner.resolve_agent(context)
        query = said or await _last_request_text(context)
        result = await owner.bridge.aretrieve(user_id, query, agent_id=agent_id)
        self.block = owner.bridge.block(result)
        used = procedure_ids([result])
        try:
            response = await call_next(event, context)
        except Exception:
            await owner.bridge.arecord_failed(user_id, self._tool_rows(), agent_id=agent_id,
                                              session_id=owner.session(context), procedures_used=used)
            raise
        finally:
            self.block = ""
        tools = self._tool_rows()
        await owner.bridge.arecord(user_id, self._rows(who, response, agent_id, tools), agent_id=agent_id,
                                   session_id=owner.session(context), run_outcome=_outcome(response, tools),
                                   procedures_used=used)
        return response

    def _tool_rows(self) -> list[dict[str, Any]]:
        """The tool messages of the turn's calls that returned (`_keep_call`)."""
        calls = [call for call, _ in self.calls]
        return self.owner.bridge.tool_messages(calls, [result for _, result in self.calls]) if calls else []

    def _rows(self, who: Said, response: ModelResponse, agent_id: str,
              tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The turn, each speaker as who they are: input, mid-turn questions and answers, reply.
        An input nobody can attribute (`speaker` None) is not recorded."""
        rows: list[dict[str, Any]] = []
        if who.words and who.speaker is HUMAN:
            rows.extend(turn(who.words, None, user_key=who.key))
        elif who.words and who.speaker is not None:
            rows.extend(turn(None, who.words, agent_name=who.speaker, reply_key=who.key))
        rows.extend(self.asked)
        rows.extend(tools)
        answer = _answer_of(response)
        # the key another participant will read this answer's envelope with (`_posted_key`)
        answer_key = _answer_key(*who.answering, answer) if who.answering else None
        rows.extend(turn(None, answer, agent_name=agent_id, reply_key=answer_key))
        return rows

    async def on_llm_call(self, call_next: Any, events: Sequence[BaseEvent], context: Context) -> ModelResponse:
        if not self.block:
            return await call_next(events, context)
        original = context.prompt
        context.prompt = [*original, self.block]
        try:
            return await call_next(events, context)
        finally:
            context.prompt = original

    async def on_tool_execution(self, call_next: Any, event: Any, context: Context) -> Any:
        # An agent run inside this tool (a delegation) inherits these variables: its task is our words.
        if self.tools_running == 0:
            self.saved_speaker = context.variables.get(SPEAKER_VARIABLE, _MISSING)
            context.variables[SPEAKER_VARIABLE] = self.owner.resolve_agent(context)
        self.tools_running += 1
        started = time.perf_counter()
        result: Any = None
        try:
            result = await call_next(event, context)
            return result
        finally:
            self._keep_call(event, result, (time.perf_counter() - started) * 1000.0)
            self.tools_running -= 1
            if self.tools_running == 0:
                if self.saved_speaker is _MISSING:
                    context.variables.pop(SPEAKER_VARIABLE, None)
                else:
                    context.variables[SPEAKER_VARIABLE] = self.saved_speaker

    def _keep_call(self, event: Any, result: Any, duration_ms: float) -> None:
        """Keep a tool call of this turn with its result (a ``ToolErrorEvent``: its exception's
        type and message, not the traceback ag2 hands the model). A call with no result event (a
        client-side tool, a call that raised through) is not kept."""
        if not isinstance(event, ToolCallEvent) or not isinstance(result, ToolResultEvent):
            return
        if isinstance(result, ToolErrorEvent):
            text, failed = f"{type(result.error).__name__}: {result.error}", True
        else:
            text = "\n".join(p.content for p in result.result.parts if isinstance(p, TextInput))
            failed = False
        self.calls.append((CallSeen(event.name, event.arguments, event.id),
                           ResultSeen(event.id, text, failed=failed, duration_ms=duration_ms, name=event.name)))

    async def on_human_input(self, call_next: Any, event: HumanInputRequest, context: Context) -> HumanMessage:
        answer = await call_next(event, context)
        if not isinstance(event, ToolApprovalRequest):  # approvals are plumbing, not conversation
            self.asked.extend(turn(None, event.content, agent_name=self.owner.resolve_agent(context)))
            self.asked.extend(turn(answer.content, None))
        return answer


_MISSING = object()


class Said(NamedTuple):
    """Who said a turn's input: `speaker` (`HUMAN`, an agent's name, or None: unknown), the human
    sender's name when the framework knows it, the `words` as said, and in an ag2.network channel
    the team keys (`_team_keys`) of the message and of this agent's answer to it (`_posted_key`)."""

    speaker: Any
    sender: str | None
    words: str
    key: str | None = None
    answering: tuple[str, str, str] | None = None  # (channel, envelope, this participant): `_answer_key`


class _Posted(NamedTuple):
    name: str
    kind: str
    text: str
    key: str
    answering: tuple[str, str, str] | None


def _posted_key(channel_id: str, envelope: Any, sender_id: str, text: str) -> str:
    """The team key of a channel message: what it answers (its causation), who posted it and its text,
    which the participant that posts an answer knows before the channel gives it an envelope; a
    message that answers nothing (the human's): its envelope."""
    answered = getattr(envelope, "causation_id", None)
    if isinstance(answered, str) and answered:
        return _answer_key(channel_id, answered, sender_id, text)
    return f"ag2:{channel_id}:{envelope.envelope_id}"


def _answer_key(channel_id: str, answered: str, sender_id: str, text: str) -> str:
    """The team key of `sender_id`'s answer `text` to the envelope `answered` (`_posted_key`)."""
    return team_keys.text_key("ag2", channel_id, answered, sender_id, text)


async def _channel_sender(context: Context, said: str) -> _Posted | None:
    """Who posted the channel message this ag2.network turn answers (the latest envelope from
    another participant whose text is the turn's input), its text and its team key."""
    hub = context.dependencies.get(_NETWORK_HUB)
    channel = context.dependencies.get(_NETWORK_CHANNEL)
    me = getattr(context.dependencies.get(_NETWORK_CLIENT), "agent_id", None)
    if not said or hub is None or channel is None:
        return None
    try:
        for envelope in reversed(await hub.read_wal(channel.channel_id)):
            if envelope.sender_id == me:
                continue
            data = envelope.event_data if isinstance(envelope.event_data, dict) else {}
            text = data.get("text", data.get("body"))
            if isinstance(text, str) and text.strip() and text.strip() in said:
                passport = await hub.get_agent(envelope.sender_id)
                answering = (channel.channel_id, envelope.envelope_id, me) if isinstance(me, str) else None
                return _Posted(passport.name, passport.effective_kind, text,
                               _posted_key(channel.channel_id, envelope, envelope.sender_id, text), answering)
    except Exception as exc:  # noqa: BLE001 - unknown sender: the input is not recorded
        log.warning("ag2: could not read the channel's sender (%s); the input is not recorded", type(exc).__name__)
    return None


async def _channel_human(context: Context) -> str | None:
    """The name of the one human participant of this ag2.network channel (None if none or several)."""
    hub = context.dependencies.get(_NETWORK_HUB)
    channel = context.dependencies.get(_NETWORK_CHANNEL)
    try:
        if hub is None or channel is None:
            raise LookupError("the context has no network hub or channel")
        humans = []
        for participant in channel.metadata.participants:
            passport = await hub.get_agent(participant.agent_id)
            if passport.effective_kind == "human":
                humans.append(passport.name)
    except Exception as exc:  # noqa: BLE001 - no human known: the user must be given
        log.warning("ag2: could not read the channel's participants (%s)", type(exc).__name__)
        return None
    return humans[0] if len(humans) == 1 else None


def _request_text(event: BaseEvent) -> str:
    """The text of a turn's request (its text parts); "" for any other trigger."""
    if not isinstance(event, ModelRequest):
        return ""
    texts = [part.content for part in event.parts if isinstance(part, TextInput)]
    return text_of([text for text in texts if text.strip()])


async def _last_request_text(context: Context) -> str:
    """The latest request in the stream's history (what a resumed turn still answers)."""
    try:
        events = await context.stream.history.get_events()
    except Exception:  # noqa: BLE001 - no history: nothing to search for
        return ""
    return latest_user_text([Line("user" if isinstance(event, ModelRequest) else "other", None, _request_text(event))
                             for event in events])


def _outcome(response: ModelResponse, tools: list[dict[str, Any]]) -> Outcome | None:
    """The outcome of the run a turn ends (`_outcome.turn_outcome`), or None while it goes on (the
    turn ended waiting on client-side tool calls). An answer the model API says it cut off
    (``finish_reason`` "length", "content_filter") is a failed run."""
    if not isinstance(response, ModelResponse) or response.tool_calls:
        return None
    return turn_outcome(tools, failed=response.finish_reason in CUT_OFF)


def _answer_of(response: ModelResponse) -> str:
    """The reply to record: the response's text (or a ``final`` tool's result), unless the turn
    ended waiting on tool calls (client-side tools): then the answer comes in a later turn."""
    if not isinstance(response, ModelResponse) or response.tool_calls:
        return ""
    return response.content or ""


# -- tools ---------------------------------------------------------------------------------------------

def memory_tools(memory: MemoryScope, *, user_id: UserSource = None, agent_id: str | None = None,
                 update: bool = True, delete: bool = True, scope_to_agent: bool = False,
                 min_relevance: float | None = None) -> list[Any]:
    """The memory tools as ag2 tools: ``search_memory``, ``recall_entity``, ``add_memory`` and (unless turned off)
    ``update_memory`` and ``delete_memory``, for ``Agent(tools=...)``.

    Each call is scoped to the turn's user, resolved as the middleware does (``user_id``, else the
    turn's ``variables["user_id"]``, else an ag2.network channel's human); without one the tool
    tells the model memory is unavailable. Update and delete reach only that user's memories.
    Saved memories carry ``agent_id`` (default: the agent's name)."""
    resolver = MemoryScopeMiddleware(memory, user_id=user_id, agent_id=agent_id, scope_to_agent=scope_to_agent,
                                     min_relevance=min_relevance)

    async def scoped(ctx: Context) -> MemoryTools | None:
        user = await resolver.resolve_user(ctx)
        if user is None:
            return None
        return MemoryTools(memory, user_id=user, agent_id=resolver.resolve_agent(ctx),
                           scope_to_agent=scope_to_agent, min_relevance=min_relevance)

    no_user = "Memory is unavailable: no user for this conversation."

    # plain functions (ag2 deep-copies tools; a bound method would copy the engine with it)
    async def search_memory(query: _Query, ctx: Context, limit: _Limit = 5) -> str:
        tools = await scoped(ctx)
        return no_user if tools is None else await tools.asearch_memory(query, limit)

    async def recall_entity(name: _Name, ctx: Context, limit: _RecallLimit = 10) -> str:
        tools = await scoped(ctx)
        return no_user if tools is None else await tools.arecall_entity(name, limit)

    async def add_memory(content: _Fact, ctx: Context) -> str:
        tools = await scoped(ctx)
        return no_user if tools is None else await tools.aadd_memory(content)

    async def update_memory(memory_id: _MemoryId, content: _NewText, ctx: Context) -> str:
        tools = await scoped(ctx)
        return no_user if tools is None else await tools.aupdate_memory(memory_id, content)

    async def delete_memory(memory_id: _MemoryId, ctx: Context) -> str:
        tools = await scoped(ctx)
        return no_user if tools is None else await tools.adelete_memory(memory_id)

    functions = {func.__name__: func for func in (search_memory, recall_entity, add_memory, update_memory,
                                                          delete_memory)}
    return [tool(functions[name], name=name, description=tool_spec(name).description)
            for name in tool_names(update=update, delete=delete)]


def _described(tool_name: str, argument: str) -> Any:
    """The description the model reads for an argument, as ag2 takes it (a pydantic ``Field``)."""
    return Field(description=tool_spec(tool_name).arguments[argument])


_Query = Annotated[str, _described("search_memory", "query")]
_Limit = Annotated[int, _described("search_memory", "limit")]
_Name = Annotated[str, _described("recall_entity", "name")]
_RecallLimit = Annotated[int, _described("recall_entity", "limit")]
_Fact = Annotated[str, _described("add_memory", "content")]
_MemoryId = Annotated[str, _described("update_memory", "memory_id")]
_NewText = Annotated[str, _described("update_memory", "content")]


class MemoryScopePlugin(Plugin):
    """Long-term memory for an ag2 1.x ``Agent`` as one ``ag2.Plugin``: the middleware, and with
    ``tools=True`` the memory tools and a system-prompt paragraph about them.

    ``Agent(..., plugins=[MemoryScopePlugin(engine, user_id="anna")])``, or per call
    ``agent.ask(..., plugins=[...])``. Takes every `MemoryScopeMiddleware` option, plus:

    Args:
        memory: the engine.
        tools: also give the agent ``search_memory``, ``recall_entity``, ``add_memory``,
            ``update_memory`` and ``delete_memory`` (scoped to the turn's user).
        automatic: retrieve before and record after every turn (turn off for tools only).
        tool_instructions: the system-prompt paragraph added with the tools ("" for none).
    """

    def __init__(self, memory: MemoryScope, *, tools: bool = False, automatic: bool = True,
                 tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS, **options: Any) -> None:
        if not tools and not automatic:
            raise ValueError("MemoryScopePlugin with tools=False and automatic=False would do nothing")
        if not isinstance(tool_instructions, str):
            raise TypeError("tool_instructions must be a string")
        self.middleware = MemoryScopeMiddleware(memory, **options)
        config = self.middleware.config
        agent_id = config.agent_id if isinstance(config.agent_id, str) else None
        given_tools = memory_tools(memory, user_id=config.user_id, agent_id=agent_id,
                                   scope_to_agent=config.scope_to_agent,
                                   min_relevance=config.min_relevance) if tools else []
        super().__init__(prompt=[tool_instructions] if tools and tool_instructions.strip() else [],
                         tools=given_tools, middleware=[self.middleware] if automatic else [])
