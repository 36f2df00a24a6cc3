"""Memory tools an agent calls itself (search, recall what is known about someone or something, add,
update, delete), framework-free.

Each framework adapter wraps these five functions in its own tool type (AgentChat
``FunctionTool``, classic AutoGen ``register_function``...), under the names `tool_names` gives
and with what `tool_spec` tells the model about them (read from the methods' docstrings, so the
text a model sees is the same in every framework). Every call is scoped to one user: update and
delete only reach that user's memories (another user's id is "not found"). A failing backend is
reported to the model as text, never raised into the agent loop; logs carry the exception type
only.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from dataclasses import dataclass
from typing import Any

from memoryscope_plugins import person
from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.errors import NotFoundError, ValidationError
from memoryscope_plugins.log_hygiene import user_ref
from memoryscope_plugins.timeparse import detect_language

from ._common import log

_THE_USER = frozenset({"me", "myself", "the user", "user", "我", "我自己", "用户"})

__all__ = ["TOOL_NAMES", "MemoryTools", "ToolSpec", "clamp_limit", "tool_names", "tool_spec"]

#: The memory tools, in the order they are given to a model.
TOOL_NAMES = ("search_memory", "recall_entity", "add_memory", "update_memory", "delete_memory")

#: The most memories one search returns.
MAX_LIMIT = 50


def tool_names(*, update: bool = True, delete: bool = True) -> list[str]:
    """The tools to give: search, recall and add always, update and delete unless turned off."""
    dropped = {name for name, keep in (("update_memory", update), ("delete_memory", delete)) if not keep}
    return [name for name in TOOL_NAMES if name not in dropped]


def clamp_limit(limit: Any, default: int) -> int:
    """A model's result limit brought into 1..`MAX_LIMIT`; `default` when it is not a number."""
    try:
        return max(1, min(int(limit), MAX_LIMIT))
    except (TypeError, ValueError):  # the model sent something odd: use the default
        return default


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about one memory tool.

    Attributes:
        name: the tool's name.
        description: what it does, on one line.
        arguments: each argument's description, in the signature's order.
        parameters: the arguments as a JSON schema (for frameworks that take one).
    """

    name: str
    description: str
    arguments: dict[str, str]
    parameters: dict[str, Any]


_JSON_TYPES = {"str": "string", "int": "integer"}


@functools.cache
def tool_spec(name: str) -> ToolSpec:
    """The name, description and arguments of the memory tool `name`, from its docstring."""
    if name not in TOOL_NAMES:
        raise ValueError(f"unknown memory tool {name!r}; expected one of {TOOL_NAMES}")
    method = getattr(MemoryTools, name)
    summary, _, args = inspect.cleandoc(method.__doc__ or "").partition("\n\nArgs:\n")
    arguments: dict[str, str] = {}
    for line in args.splitlines():
        entry = re.match(r"\s{0,4}(\w+): (.*)", line)
        if entry:
            arguments[entry.group(1)] = entry.group(2).strip()
        elif arguments:  # a continuation line
            last = next(reversed(arguments))
            arguments[last] = f"{arguments[last]} {line.strip()}"
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in list(inspect.signature(method).parameters.values())[1:]:
        properties[param.name] = {"type": _JSON_TYPES[param.annotation], "description": arguments[param.name]}
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            properties[param.name]["default"] = param.default
    return ToolSpec(name, " ".join(summary.split()), arguments,
                    {"type": "object", "properties": properties, "required": required})


class MemoryTools:
    """The five memory tools for one user.

    Args:
        memory: the engine.
        user_id: whose memories the tools read and write.
        agent_id: recorded with saved memories, and the scope with `scope_to_agent`.
        scope_to_agent: search only the memories this agent recorded.
        min_relevance: relevance floor for searches (default: the engine's).
        default_limit: results per search when the model gives no limit.
    """

    def __init__(self, memory: MemoryScope, *, user_id: str, agent_id: str = "assistant",
                 scope_to_agent: bool = False, min_relevance: float | None = None, default_limit: int = 5) -> None:
        if not isinstance(memory, MemoryScope):
            raise TypeError(f"memory must be a MemoryScope, not {type(memory).__name__}")
        for name, value in (("user_id", user_id), ("agent_id", agent_id)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string")
        self.memory, self.user_id, self.agent_id = memory, user_id, agent_id
        self.scope_to_agent, self.min_relevance, self.default_limit = scope_to_agent, min_relevance, default_limit

    def search_memory(self, query: str, limit: int = 5) -> str:
        """Search long-term memory about the user (facts, preferences, plans, past events).

        Args:
            query: What to look for, e.g. a person, a place, a date or a topic.
            limit: The most memories to return (1-50).
        """
        if not isinstance(query, str) or not query.strip():
            return "No query given: nothing to search."
        limit = clamp_limit(limit, self.default_limit)
        try:
            result = self.memory.retrieve(self.user_id, query, top_k=limit, min_relevance=self.min_relevance,
                                          agent_id=self.agent_id if self.scope_to_agent else None)
        except Exception as exc:  # noqa: BLE001 - reported to the model, logged by type
            return self._failed("search", exc)
        if not result.memories:
            return "No relevant memories found."
        return "\n".join(f"[{m.memory.id}] {m.memory.created_at:%Y-%m-%d}: {m.memory.content}"
                         for m in result.memories)

    def recall_entity(self, name: str, limit: int = 10) -> str:
        """What long-term memory knows about a person, place, pet, organisation or thing the user
        has talked about (or about the user): how often and when it came up, and its memories.

        Args:
            name: Its name as the user says it, e.g. "Caroline", "Mel", "Boston", "王磊"; "me" for the user.
            limit: The most memories to return (1-50).
        """
        if not isinstance(name, str) or not name.strip():
            return "No name given: nothing to recall."
        limit = clamp_limit(limit, 10)
        try:
            return self._recall(name, limit)
        except NotFoundError:
            found = self.search_memory(name, limit)
            return f"Nothing called {name!r} is known as a person, place or thing. Memories that match: \n{found}"
        except ValidationError as exc:
            return f"Cannot recall {name!r}: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported to the model, logged by type
            return self._failed("recall", exc)

    def _recall(self, name: str, limit: int) -> str:
        profile: list[str] = []
        language = detect_language(name)
        if name.casefold() in _THE_USER:
            values = [value for values in self.memory.profile(self.user_id).values() for value in values]
            profile = person.profile_lines(values, language)
            users = [e for e in self.memory.entities(self.user_id, kind="person", limit=1000)
                     if e.metadata.get("speaker_role") == "user"]
            if not users:
                return "\n".join(["What the user's profile says:", *profile]) if profile else "Nothing is known yet."
            name = users[0].id
        details = self.memory.entity(self.user_id, name, limit=limit)
        entity = details.entity
        also = f"; also called {', '.join(entity.aliases)}" if entity.aliases else ""
        lines = [f"{entity.name} ({entity.kind.value}{also}): mentioned {entity.mention_count} time(s)"
                 + (f", first {entity.first_mentioned_at:%Y-%m-%d}, last {entity.last_mentioned_at:%Y-%m-%d}."
                    if entity.first_mentioned_at and entity.last_mentioned_at else ".")]
        if details.profile or profile:
            lines += ["Profile:", *(profile or person.profile_lines(details.profile, language))]
        lines += [f"[{m.id}] {m.created_at:%Y-%m-%d}: {m.content}" for m in details.memories]
        return "\n".join(lines) if details.memories else "\n".join([*lines, "No memories about it are stored."])

    def add_memory(self, content: str) -> str:
        """Save a durable fact about the user to long-term memory: one complete, standalone sentence
        (who, what, when, where).

        Args:
            content: The fact to remember.
        """
        if not isinstance(content, str) or not content.strip():
            return "Nothing to save: content is empty."
        try:
            memory = self.memory.add(self.user_id, content, agent_id=self.agent_id)
        except Exception as exc:  # noqa: BLE001 - reported to the model, logged by type
            return self._failed("add", exc)
        return f"Saved as memory {memory.id}."

    def update_memory(self, memory_id: str, content: str) -> str:
        """Correct a memory that is wrong or outdated (ids come from search_memory).

        Args:
            memory_id: The id of the memory (ids come from search_memory).
            content: The memory's new text.
        """
        if not isinstance(content, str) or not content.strip():
            return "Nothing to update: content is empty."
        try:
            self.memory.update(self.user_id, memory_id, content=content)
        except NotFoundError:
            return f"No memory {memory_id!r} found."
        except Exception as exc:  # noqa: BLE001 - reported to the model, logged by type
            return self._failed("update", exc)
        return f"Memory {memory_id} updated."

    def delete_memory(self, memory_id: str) -> str:
        """Delete a memory the user asked to forget, or one that is wrong (ids come from search_memory).

        Args:
            memory_id: The id of the memory (ids come from search_memory).
        """
        try:
            self.memory.delete(self.user_id, memory_id)
        except NotFoundError:
            return f"No memory {memory_id!r} found."
        except Exception as exc:  # noqa: BLE001 - reported to the model, logged by type
            return self._failed("delete", exc)
        return f"Memory {memory_id} deleted."

    # async twins: the same work off the event loop
    async def asearch_memory(self, query: str, limit: int = 5) -> str:
        """Async twin of `search_memory`."""
        return await asyncio.to_thread(self.search_memory, query, limit)

    async def arecall_entity(self, name: str, limit: int = 10) -> str:
        """Async twin of `recall_entity`."""
        return await asyncio.to_thread(self.recall_entity, name, limit)

    async def aadd_memory(self, content: str) -> str:
        """Async twin of `add_memory`."""
        return await asyncio.to_thread(self.add_memory, content)

    async def aupdate_memory(self, memory_id: str, content: str) -> str:
        """Async twin of `update_memory`."""
        return await asyncio.to_thread(self.update_memory, memory_id, content)

    async def adelete_memory(self, memory_id: str) -> str:
        """Async twin of `delete_memory`."""
        return await asyncio.to_thread(self.delete_memory, memory_id)

    def _failed(self, what: str, exc: Exception) -> str:
        log.warning("memory tool %s failed for user %s (%s)", what, user_ref(self.user_id), type(exc).__name__)
        return f"Memory is unavailable right now ({type(exc).__name__})."
