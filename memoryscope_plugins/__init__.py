"""memoryscope-plugins: long-term memory for LLM agents, with plugins for AutoGen, AgentScope and LangChain.

    from memoryscope_plugins import MemoryScope
    memory = MemoryScope()                       # embedded store + local embedder, no key needed
    memory.record("anna", [{"role": "user", "content": "I'm allergic to peanuts."}])
    memory.retrieve("anna", "what should I cook for Anna?").context
"""

from .engine import MemoryScope
from .errors import (
    ConfigError,
    MemoryScopeError,
    ModelAuthError,
    ModelError,
    ModelNotFoundError,
    NotFoundError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    ValidationError,
)
from .settings import Settings
from .types import (
    Entity,
    EntityDetails,
    EntityKind,
    EntityMention,
    Memory,
    MemoryStatus,
    MemoryType,
    Message,
    ProfileValue,
    RetrievalResult,
    ScoredMemory,
    TimeRange,
    ToolCall,
    ToolStats,
)

__version__ = "0.1.0"

__all__ = [
    "MemoryScope", "Settings", "Memory", "MemoryStatus", "MemoryType", "Message", "RetrievalResult",
    "ScoredMemory", "TimeRange", "MemoryScopeError", "ValidationError", "NotFoundError", "StoreError",
    "StoreLockedError", "SchemaVersionError", "ModelError", "ModelAuthError", "ModelNotFoundError", "ConfigError",
    "Entity", "EntityDetails", "EntityKind", "EntityMention", "ProfileValue", "ToolCall", "ToolStats",
]
