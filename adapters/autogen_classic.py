"""Long-term memory for classic AutoGen (the ``autogen`` package, ``ConversableAgent``).

Usage::

    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.adapters.autogen_classic import MemoryCapability

    MemoryCapability(MemoryScope(), user_id="anna").add_to_agent(assistant)

or build the agent with memory: ``MemoryConversableAgent("assistant", memory=engine, user_id="anna",
llm_config=...)``.

How it hooks in, and why this way: the capability registers one reply function (a sync and an
async twin) at position 0 of the agent's reply-function list. It runs first in every
``generate_reply`` / ``a_generate_reply`` (direct calls, two-agent chats, group chats alike) and

1. retrieves the user's memories for the latest received user message, with ``sender`` known
   (so ``user_id`` may be a callable of the sender) and, in async chats, without blocking the
   event loop;
2. hands the remaining reply functions (termination check, tool calls, code execution, the LLM
   reply...) a *new* message list with the memory block added as a system message, so the
   agent's stored chat history is never touched;
3. once one of them produced the final reply, records the received message and the reply, with
   the agent's tool calls whose responses arrived since its last reply (as the agent's,
   `MemoryScope.tool_stats`; never the user's memories).

Hooks alone cannot do this: ``process_all_messages_before_reply`` sees neither the sender nor
the reply and is sync only; ``process_message_before_send`` runs only inside ``send()`` and so
misses direct ``generate_reply`` calls. The price of the wrapper is that it walks the remaining
reply functions itself, the way ``generate_reply`` does (trigger matching, sync/async twins);
an ``exclude=`` argument given to ``generate_reply`` is not seen by it (AutoGen itself never
passes one).
"""

from __future__ import annotations

import copy
import functools
import inspect
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from autogen import Agent, ConversableAgent

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.types import MemoryType

from . import _team_keys as team_keys
from ._common import (
    DEFAULT_TEMPLATE,
    CallSeen,
    IdSource,
    Line,
    MemoryBridge,
    MemoryConfig,
    OnError,
    Outcome,
    ResultSeen,
    latest_user_text,
    procedure_ids,
    text_of,
    turn,
    turn_outcome,
)

_is_async: Callable[[Any], bool]
try:  # the predicate ConversableAgent itself uses
    from autogen.fast_depends.utils import is_coroutine_callable as _is_async
except ImportError:  # pragma: no cover - older/newer layouts
    _is_async = inspect.iscoroutinefunction

__all__ = ["MemoryCapability", "MemoryConversableAgent", "register_memory_tools"]

_TEXT_ROLES = ("user",)
MAX_OPEN_CALLS = 256  # tool calls of a run kept for its outcome (the last call of each tool is what counts)
MAX_CHATS = 1024  # two-agent chats whose id is kept (a chat forgotten takes a new id: its messages may repeat)


class MemoryCapability:
    """Gives a ``ConversableAgent`` long-term memory (an AutoGen "agent capability").

    Who is who: in a two-agent chat the agent talking to this one is the human. In a
    ``GroupChat`` every message arrives through the ``chat_manager``, so the speaker is read from
    each message's ``name``: the human is a ``UserProxyAgent`` of the group, an agent that asks for
    human input, or a name in `human_names` (and when there is none of these, the agent that
    started the chat); every other agent's words are recorded as that agent's (role assistant, its
    name), never as the user's.

    Args:
        memory: the engine.
        user_id: whose memories: a string, or ``callable(agent: Agent | None) -> str | None``
            called with the human agent (in a group chat the group's human, not the manager;
            None skips memory for that turn).
        agent_id: recorded as the assistant; default: the agent's name.
        top_k: memories injected per reply (default: the engine's setting).
        types: restrict retrieval to these memory types.
        template: the memory block (must contain ``{context}``).
        scope_to_agent: retrieve only memories recorded by this agent.
        on_error: ``"warn"`` (a failing backend means no memories) or ``"raise"``.
        min_relevance: relevance floor (default: the engine's ``retrieval.min_relevance``).
        human_names: speaker names that are the human in group chats.
        config: a full `MemoryConfig` instead of the keyword arguments above.
    """

    def __init__(self, memory: MemoryScope, *, user_id: IdSource = None, agent_id: IdSource = None,
                 top_k: int | None = None, types: Sequence[MemoryType | str] | None = None,
                 template: str = DEFAULT_TEMPLATE, scope_to_agent: bool = False, on_error: OnError = "warn",
                 min_relevance: float | None = None, human_names: Sequence[str] = (),
                 config: MemoryConfig | None = None) -> None:
        if config is None:
            if user_id is None:
                raise ValueError("user_id is required (a string or a callable of the sender)")
            config = MemoryConfig(user_id=user_id, agent_id=agent_id, top_k=top_k, types=types, template=template,
                                  scope_to_agent=scope_to_agent, on_error=on_error, min_relevance=min_relevance,
                                  human_names=human_names)
        self.config = config
        self.bridge = MemoryBridge(memory, config, "autogen")
        # per agent: the tool calls of its run so far (replies asking for tools end no run), with the
        # length of the chat they were seen in (a shorter chat later is a new one: they are dropped)
        self._open_calls: dict[int, tuple[int, list[dict[str, Any]]]] = {}
        # per (agent, sender): the first message of their chat and the chat's id (`_pair_chat`)
        self._chats: OrderedDict[tuple[int, int], tuple[dict[str, Any], str]] = OrderedDict()

    def add_to_agent(self, agent: ConversableAgent) -> None:
        """Register the memory reply function (sync and async) first in `agent`'s reply chain."""
        if not isinstance(agent, ConversableAgent):
            raise TypeError("MemoryCapability works with autogen.ConversableAgent")
        if any(entry["reply_func"] == self.memory_reply for entry in agent._reply_func_list):
            return  # already added: adding twice would retrieve and record twice per reply
        agent.register_reply([Agent, None], self.memory_reply, position=0)
        agent.register_reply([Agent, None], self.a_memory_reply, position=0, ignore_async_in_sync_chat=True)

    # -- the reply functions -----------------------------------------------------------------------
    def memory_reply(self, recipient: ConversableAgent, messages: list[dict[str, Any]] | None = None,
                     sender: Agent | None = None, config: Any = None) -> tuple[bool, Any]:
        """Retrieve, run the rest of the reply chain on an augmented copy, record; sync."""
        if not messages:
            return False, None
        humans, human = self._humans(recipient, sender)
        user_id, agent_id = self._ids(recipient, human)
        query = _latest_user_text(messages, humans)
        result = self.bridge.retrieve(user_id, query, agent_id=agent_id)
        augmented = _with_block(messages, self.bridge.block(result))
        used = procedure_ids([result])
        try:
            final, reply = _run_rest_sync(recipient, augmented, sender, skip=(self.memory_reply, self.a_memory_reply))
        except Exception:
            self._open_calls.pop(id(recipient), None)
            self.bridge.record_failed(user_id, self._tool_rows(messages, recipient), agent_id=agent_id,
                                      procedures_used=used)
            raise
        rows, tools = self._turn(messages, reply, agent_id, recipient, humans, sender)
        self.bridge.record(user_id, rows, agent_id=agent_id,
                           run_outcome=self._outcome(recipient, messages, reply, tools), procedures_used=used)
        return final, reply

    async def a_memory_reply(self, recipient: ConversableAgent, messages: list[dict[str, Any]] | None = None,
                             sender: Agent | None = None, config: Any = None) -> tuple[bool, Any]:
        """Async twin of `memory_reply` (used in ``a_initiate_chat`` / ``a_generate_reply``)."""
        if not messages:
            return False, None
        humans, human = self._humans(recipient, sender)
        user_id, agent_id = self._ids(recipient, human)
        query = _latest_user_text(messages, humans)
        result = await self.bridge.aretrieve(user_id, query, agent_id=agent_id)
        augmented = _with_block(messages, self.bridge.block(result))
        used = procedure_ids([result])
        try:
            final, reply = await _run_rest_async(recipient, augmented, sender,
                                                 skip=(self.memory_reply, self.a_memory_reply))
        except Exception:
            self._open_calls.pop(id(recipient), None)
            await self.bridge.arecord_failed(user_id, self._tool_rows(messages, recipient), agent_id=agent_id,
                                             procedures_used=used)
            raise
        rows, tools = self._turn(messages, reply, agent_id, recipient, humans, sender)
        await self.bridge.arecord(user_id, rows, agent_id=agent_id,
                                  run_outcome=self._outcome(recipient, messages, reply, tools), procedures_used=used)
        return final, reply

    # -- helpers ----------------------------------------------------------------------------------------
    def _ids(self, recipient: ConversableAgent, sender: Agent | None) -> tuple[str | None, str]:
        try:
            user_id = self.config.resolve_user(sender)
            agent_id = self.config.resolve_agent(sender, default=recipient.name)
        except Exception as exc:  # noqa: BLE001 - a user-supplied id callable failed: no memory for this turn
            self.bridge.report_failure("id resolution", "?", exc)
            return None, recipient.name
        return user_id, agent_id

    def _humans(self, recipient: ConversableAgent, sender: Agent | None) -> tuple[set[str] | None, Agent | None]:
        """The names that are the human, and the human agent (for `user_id` callables).

        None for the names means "whoever talks to this agent" (a two-agent chat)."""
        groupchat = getattr(sender, "groupchat", None)
        if groupchat is None:
            return (set(self.config.human_names) | {sender.name} if self.config.human_names and sender is not None
                    else None), sender
        from autogen import UserProxyAgent
        people = [a for a in getattr(groupchat, "agents", []) if a is not recipient and (
            isinstance(a, UserProxyAgent) or getattr(a, "human_input_mode", "NEVER") != "NEVER"
            or a.name in self.config.human_names)]
        if not people and not self.config.human_names and getattr(groupchat, "messages", None):
            # no proxy or human-input agent in the group: the agent that started the chat speaks for the human
            first = groupchat.messages[0].get("name")
            people = [a for a in groupchat.agents if a.name == first and a is not recipient]
        return {a.name for a in people} | set(self.config.human_names), (people[0] if people else None)

    def _turn(self, messages: list[dict[str, Any]], reply: Any, agent_id: str, recipient: ConversableAgent,
              humans: set[str] | None, sender: Agent | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What arrived since this agent last spoke, each speaker as who they are, the agent's
        tool calls answered since then (`_tool_calls`), and the reply; and those tool calls. In a
        group chat each message carries its place in the chat (`_group_keys`), so that another
        member with memory for the same user does not record it again; in a two-agent chat its
        place in the agent's history (`_pair_chat`), so that a message recorded unanswered is not
        recorded again with the next one."""
        received: list[dict[str, Any]] = []
        positions: list[int] = []
        for position in range(len(messages) - 1, -1, -1):
            message = messages[position]
            if message.get("role") == "assistant" or message.get("name") == recipient.name:
                break  # this agent's own previous message: earlier ones were recorded then
            if not _is_said(message):
                continue
            received.append(message)
            positions.append(position)
        received.reverse()
        positions.reverse()
        reply_text = text_of(reply.get("content")) if isinstance(reply, dict) else text_of(reply)
        groupchat = getattr(sender, "groupchat", None)
        if groupchat is not None:
            keys, reply_key = _group_keys(groupchat, received, recipient.name, reply_text)
        else:
            # a message the agent did not answer (a termination message, a None reply) has no
            # reply after it, so the next turn receives it again: its key records it once
            chat = self._pair_chat(recipient, sender, messages)
            keys = [_position_key(chat, position, message.get("name"), text_of(message.get("content")))
                    for position, message in zip(positions, received)]
            reply_key = None
        rows: list[dict[str, Any]] = []
        for message, key in zip(received, keys):
            text = text_of(message.get("content"))
            speaker = message.get("name")
            if humans is None or speaker is None or speaker in humans:
                rows.extend(turn(text, None, user_key=key))
            else:
                rows.extend(turn(None, text, agent_name=speaker, reply_key=key))
        tools = self._tool_rows(messages, recipient)
        rows.extend(tools)
        rows.extend(turn(None, reply_text, agent_name=agent_id, reply_key=reply_key))
        return rows, tools

    def _pair_chat(self, recipient: ConversableAgent, sender: Agent | None, messages: list[dict[str, Any]]) -> str:
        """An id of the two-agent chat `messages` holds (`recipient`'s history with `sender`): a new
        one whenever the history starts with another message than it did (``clear_history``, or
        another list handed to ``generate_reply``), as `_chat_id` does for a group chat."""
        pair = (id(recipient), id(sender))
        held, chat = _same_chat(self._chats.get(pair), messages[0])
        self._chats[pair] = held
        self._chats.move_to_end(pair)
        while len(self._chats) > MAX_CHATS:
            self._chats.popitem(last=False)
        return chat

    def _outcome(self, recipient: ConversableAgent, messages: list[dict[str, Any]], reply: Any,
                 tools: list[dict[str, Any]]) -> Outcome | None:
        """The outcome of the run a reply ends (`_outcome.turn_outcome` over the run's calls); None
        while the run goes on: a reply asking for tool calls is answered by the tools' responses
        and the agent's next reply, which ends the run."""
        seen_in, earlier = self._open_calls.pop(id(recipient), (0, []))
        calls = (earlier if len(messages) > seen_in else []) + tools
        if isinstance(reply, dict) and (reply.get("tool_calls") or reply.get("function_call")):
            self._open_calls[id(recipient)] = (len(messages), calls[-MAX_OPEN_CALLS:])
            return None
        return turn_outcome(calls)

    def _tool_rows(self, messages: list[dict[str, Any]], recipient: ConversableAgent) -> list[dict[str, Any]]:
        """The tool messages of the agent's calls answered since its last reply (`_tool_calls`)."""
        calls, results = _tool_calls(messages, recipient)
        return self.bridge.tool_messages(calls, results) if calls else []


class MemoryConversableAgent(ConversableAgent):
    """A ``ConversableAgent`` with long-term memory; takes every ``ConversableAgent`` argument plus:

    Args:
        memory: the engine.
        user_id: whose memories (a string, or a callable of the sender agent).
        memory_agent_id: recorded as the assistant; default: the agent's name.
        top_k: memories injected per reply.
        memory_config: a full `MemoryConfig` instead of the three options above.
    """

    def __init__(self, name: str, *args: Any, memory: MemoryScope, user_id: IdSource = None,
                 memory_agent_id: IdSource = None, top_k: int | None = None,
                 memory_config: MemoryConfig | None = None, **kwargs: Any) -> None:
        super().__init__(name, *args, **kwargs)
        self.memory_capability = MemoryCapability(memory, user_id=user_id, agent_id=memory_agent_id, top_k=top_k,
                                                  config=memory_config)
        self.memory_capability.add_to_agent(self)


def register_memory_tools(memory: MemoryScope, *, caller: ConversableAgent, executor: ConversableAgent,
                          user_id: str, agent_id: str | None = None, update: bool = True, delete: bool = True,
                          scope_to_agent: bool = False, min_relevance: float | None = None) -> list[str]:
    """Register memory tools with ``autogen.register_function``: `caller` (the LLM agent) may call
    ``search_memory``, ``add_memory`` and (unless turned off) ``update_memory`` and
    ``delete_memory``; `executor` runs them. All are scoped to `user_id`. Returns the tool names."""
    from autogen import register_function

    from ._tools import MemoryTools, tool_names, tool_spec
    tools = MemoryTools(memory, user_id=user_id, agent_id=agent_id or caller.name, scope_to_agent=scope_to_agent,
                        min_relevance=min_relevance)
    names = tool_names(update=update, delete=delete)
    for name in names:
        register_function(_plain(getattr(tools, name)), caller=caller, executor=executor, name=name,
                          description=tool_spec(name).description)
    return names


def _plain(method: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function calling a bound method (``register_function`` takes functions only)."""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)
    return call


# -- the reply chain --------------------------------------------------------------------------------

def _latest_user_text(messages: list[dict[str, Any]], humans: set[str] | None = None) -> str:
    """Text of the most recent message the agent received from the human (from its interlocutor
    in a two-agent chat: `humans` None)."""
    return latest_user_text([_line(message) for message in messages], humans)


def _line(message: dict[str, Any]) -> Line:
    """A chat message in the adapters' common shape: a user-role message other than a tool
    response is the user's (when its sender is the human)."""
    return Line("user" if _is_said(message) else "other", message.get("name"), text_of(message.get("content")))


def _tool_calls(messages: list[dict[str, Any]], recipient: ConversableAgent) -> tuple[list[CallSeen], list[ResultSeen]]:
    """The agent's latest tool calls (``tool_calls``, or a legacy ``function_call``) and the
    responses that arrived since (``tool_responses`` by call id; ``role: function`` by name): each
    batch is taken once, by the reply that follows its responses; another agent's calls (its
    name on an assistant message) are never this agent's. AutoGen marks no failure
    but writes ``"Error: ..."`` for a tool that raised, arguments that are not JSON or an unknown
    function: such a response is an error."""
    results: list[ResultSeen] = []
    for message in reversed(messages):
        name = message.get("name")
        if message.get("role") == "assistant" and name not in (None, recipient.name):
            return [], []  # another agent's calls (a group chat): the responses since are its
        if name == recipient.name or message.get("role") == "assistant":
            if not results:
                return [], []
            asked = [(c.get("function") or {}, c.get("id"))
                     for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            calls = [CallSeen(str(f.get("name") or ""), f.get("arguments"), i) for f, i in asked]
            call = message.get("function_call")
            if isinstance(call, dict):
                calls.append(CallSeen(str(call.get("name") or ""), call.get("arguments"), None))
            return calls, results
        for response in reversed(message.get("tool_responses") or []):
            results.insert(0, _response(response.get("tool_call_id"), response.get("content")))
        if message.get("role") == "function":
            results.insert(0, _response(None, message.get("content"), message.get("name")))
    return [], []


def _group_keys(groupchat: Any, received: list[dict[str, Any]], speaker: str,
                reply_text: str) -> tuple[list[str | None], str | None]:
    """The team keys (`_team_keys`) of the messages an agent received in a group chat, and of its
    reply: each message's position in the chat's log with who said it and its text. The received
    messages are matched to the log from its end, in order (the same words said twice are two
    positions); the reply takes the next position, where the manager appends it. Nones outside a
    group chat, or for a message the log does not hold."""
    keys: list[str | None] = [None] * len(received)
    chat = _chat_id(groupchat)  # None unless the group chat's log is a list holding messages
    log = getattr(groupchat, "messages", None)
    if chat is None or not isinstance(log, list):
        return keys, None
    end = len(log)
    for index in range(len(received) - 1, -1, -1):
        name, text = received[index].get("name"), text_of(received[index].get("content"))
        position = end - 1
        while position >= 0 and not (isinstance(log[position], dict) and log[position].get("name") == name
                                     and text_of(log[position].get("content")) == text):
            position -= 1
        if position < 0:
            break  # not in the log: neither are the ones before it, as far as we can tell
        keys[index] = _position_key(chat, position, name, text)
        end = position
    return keys, _position_key(chat, len(log), speaker, reply_text)


def _chat_id(groupchat: Any) -> str | None:
    """An id of the chat this group chat's log holds now (None when the log is empty or the object
    takes no attribute): a new one whenever the log starts with another message than it did, so a
    chat run again after ``reset()`` never takes the keys of the one before (the same words at the
    same place are another message)."""
    log = getattr(groupchat, "messages", None)
    if not isinstance(log, list) or not log:
        return None
    known = getattr(groupchat, "_memoryscope_chat", None)
    held, chat = _same_chat(known, log[0])
    if held is not known:
        try:
            groupchat._memoryscope_chat = held
        except (AttributeError, TypeError):
            return None
    return chat


def _same_chat(known: Any, first: Any) -> tuple[tuple[Any, str], str]:
    """(what to hold, the chat's id): `known` (a held (first message, id) pair) when the chat still
    starts with `first`, else a new id. The first message itself is held (not its address), so a
    new chat's cannot pass for it."""
    if isinstance(known, tuple) and len(known) == 2 and known[0] is first:
        return known, str(known[1])
    chat = uuid.uuid4().hex
    return (first, chat), chat


def _position_key(chat: str, position: int, name: Any, text: str) -> str:
    # who said it and what, with the position: a guess of the reply's position can never stand for
    # another message
    return team_keys.text_key("autogen", chat, position, name, text)


def _response(call_id: Any, content: Any, name: Any = None) -> ResultSeen:
    text = text_of(content)
    return ResultSeen(str(call_id) if call_id is not None else None, text, failed=text.startswith("Error: "),
                      name=str(name) if name is not None else None)


def _is_said(message: dict[str, Any]) -> bool:
    """Whether a message holds someone's words (a user-role message, not a tool response)."""
    return message.get("role", "user") in _TEXT_ROLES and not message.get("tool_responses")


def _with_block(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """A copy of `messages` with the memory block as a leading system message (or `messages`
    itself when there is nothing to add). The stored history is never modified."""
    if not block:
        return messages
    return [{"role": "system", "content": block}, *copy.deepcopy(messages)]


def _matches(agent: ConversableAgent, entry: dict[str, Any], sender: Agent | None) -> bool:
    return agent._match_trigger(entry["trigger"], sender)


def _run_rest_sync(agent: ConversableAgent, messages: list[dict[str, Any]], sender: Agent | None,
                   skip: tuple[Callable[..., Any], ...]) -> tuple[bool, Any]:
    """The rest of ``generate_reply``'s loop: the first final reply of the other functions."""
    for entry in list(agent._reply_func_list):
        func = entry["reply_func"]
        if func in skip or _is_async(func) or not _matches(agent, entry, sender):
            continue
        final, reply = func(agent, messages=messages, sender=sender, config=entry["config"])
        if final:
            return True, reply
    return True, agent._default_auto_reply


async def _run_rest_async(agent: ConversableAgent, messages: list[dict[str, Any]], sender: Agent | None,
                          skip: tuple[Callable[..., Any], ...]) -> tuple[bool, Any]:
    """The rest of ``a_generate_reply``'s loop (sync functions with an async twin are skipped)."""
    twins = agent._get_sync_funcs_to_skip_in_async_chat() if hasattr(
        agent, "_get_sync_funcs_to_skip_in_async_chat") else set()
    for entry in list(agent._reply_func_list):
        func = entry["reply_func"]
        if func in skip or func in twins or not _matches(agent, entry, sender):
            continue
        if _is_async(func):
            final, reply = await func(agent, messages=messages, sender=sender, config=entry["config"])
        else:
            final, reply = func(agent, messages=messages, sender=sender, config=entry["config"])
        if final:
            return True, reply
    return True, agent._default_auto_reply
