"""Memory stores: the protocol and the embedded SQLite default (server stores import lazily)."""

from .base import Candidate, MemoryFilter, MemoryStore, SearchRequest, StoredMessage
from .sqlite_store import SQLiteStore

__all__ = ["Candidate", "MemoryFilter", "MemoryStore", "SearchRequest", "StoredMessage", "SQLiteStore"]
