"""The public names: each module users import from lists in ``__all__`` exactly the names below, each
of them exists, is public and is documented.

Adding or removing a public name means updating EXPORTS here, on purpose: the list is the public API.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

EXPORTS: dict[str, set[str]] = {
    "memoryscope_plugins": {
        "MemoryScope", "Settings", "Memory", "MemoryStatus", "MemoryType", "Message", "RetrievalResult",
        "ScoredMemory", "TimeRange", "MemoryScopeError", "ValidationError", "NotFoundError", "StoreError",
        "StoreLockedError", "SchemaVersionError", "ModelError", "ModelAuthError", "ModelNotFoundError",
        "ConfigError", "Entity", "EntityDetails", "EntityKind", "EntityMention", "ProfileValue", "ToolCall",
        "ToolStats",
    },
    "memoryscope_plugins.models": {"ChatModel", "ChatResult", "Embedder", "Reranker", "TokenUsage",
                                   "LocalOnnxEmbedder"},
    "memoryscope_plugins.storage": {"Candidate", "MemoryFilter", "MemoryStore", "SearchRequest", "StoredMessage",
                                    "SQLiteStore"},
    "memoryscope_plugins.person": {"EntityPlan", "MULTI_VALUED", "NameMatch", "NameMatcher", "ProfileProposal",
                                   "ProposedEntity", "SINGLE_VALUED", "apply", "current", "entity_kind",
                                   "entity_question", "history", "is_multi_valued", "merge", "normalise_key",
                                   "normalise_name", "plan_entities", "plan_new_entities", "profile_lines", "rank",
                                   "record_mentions", "rename", "retract", "set_by_user", "timeline"},
    "memoryscope_plugins.server": {"ApiKey", "KeyRing", "ServerConfig", "create_app"},
    "memoryscope_plugins.adapters.ag2": {"DEFAULT_TOOL_INSTRUCTIONS", "SPEAKER_VARIABLE", "USER_VARIABLE",
                                         "MemoryScopeMiddleware", "MemoryScopePlugin", "memory_tools"},
    "memoryscope_plugins.adapters.agentscope": {"DEFAULT_TOOL_INSTRUCTIONS", "MEMORY_MSG_NAME",
                                                "MemoryScopeMiddleware"},
    "memoryscope_plugins.adapters.autogen_agentchat": {"MemoryAssistantAgent", "MemoryScopeMemory",
                                                       "MemoryScopeMemoryConfig", "memory_tools",
                                                       "run_stream_with_memory", "run_with_memory"},
    "memoryscope_plugins.adapters.autogen_classic": {"MemoryCapability", "MemoryConversableAgent",
                                                     "register_memory_tools"},
    "memoryscope_plugins.adapters.langchain": {"MemoryScopeChatMemory", "MemoryScopeMiddleware",
                                               "MemoryScopeRetriever"},
    "memoryscope_plugins.adapters.langgraph_store": {"MemoryScopeStore"},
}


def _documented_constants(path: Path) -> set[str]:
    """Names assigned at module level right under a ``#:`` comment (Sphinx's attribute doc comment) in
    the module at `path`, or in the sibling module it imports them from (``from ._tools import NAME``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: set[str] = set()
    for node in ast.parse("\n".join(lines)).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            source = path.parent / (node.module.replace(".", "/") + ".py")
            if source.is_file():
                found |= _documented_constants(source) & {alias.asname or alias.name for alias in node.names}
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if node.lineno >= 2 and lines[node.lineno - 2].lstrip().startswith("#:"):
            found.update(target.id for target in targets if isinstance(target, ast.Name))
    return found


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_all_lists_exactly_the_public_names(name):
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    assert set(exported) == EXPORTS[name], (
        f"{name}.__all__ changed: added {sorted(set(exported) - EXPORTS[name])}, "
        f"removed {sorted(EXPORTS[name] - set(exported))}; update EXPORTS if that is intended")
    assert not [n for n in exported if n.startswith("_")], f"{name} exports a private name"


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_every_exported_name_exists_and_is_documented(name):
    module = importlib.import_module(name)
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # what a star import gives is what __all__ promises
    assert module.__file__ is not None
    constants = _documented_constants(Path(module.__file__))
    for export in module.__all__:
        assert export in namespace, f"{name}.{export} is listed in __all__ but does not exist"
        value = getattr(module, export)
        if inspect.isclass(value) or inspect.isroutine(value):
            assert (value.__doc__ or "").strip(), f"{name}.{export} has no docstring"
        else:
            assert export in constants, f"{name}.{export} (a constant) has no '#:' doc comment"

