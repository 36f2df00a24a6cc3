"""Errors raised by memoryscope-plugins. Every public failure is one of these."""

from __future__ import annotations


class MemoryScopeError(Exception):
    """Base class of every error this library raises on purpose."""


class ValidationError(MemoryScopeError, ValueError):
    """A public entry point was given input it cannot accept (wrong type, empty, too large)."""


class NotFoundError(MemoryScopeError, KeyError):
    """A memory id (or a user) does not exist in the store."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "not found"


class StoreError(MemoryScopeError):
    """The memory store failed: corrupted, locked past its timeout, or unreachable."""


class StaleLedgerError(StoreError, ValueError):
    """A ledger write names an entity or a memory the store does not hold for that user: a cached
    view of the ledger went stale (another process deleted or merged the entity). Nothing is written."""


class StoreLockedError(StoreError):
    """The store file stayed locked by another writer for longer than the busy timeout."""


class StoreCorruptError(StoreError):
    """The store file is damaged or is not a store (empty, truncated, pages broken); the message
    says what to do (restore a backup, move the file aside, or recover it)."""


class SchemaVersionError(StoreError):
    """The store was written by a newer schema version than this library knows."""


class LeaseLostError(MemoryScopeError, RuntimeError):
    """A consolidation commit was refused: the user's lease is no longer the committer's (expired,
    or taken over by another worker). Nothing was written; the step's messages stay pending."""


class MessagesGoneError(MemoryScopeError, RuntimeError):
    """A consolidation commit was refused: a message it would mark done is no longer pending (its
    turn was deleted, or another step finished it meanwhile). Nothing was written."""


class ModelError(MemoryScopeError):
    """A model (embedder, reranker, LLM) failed after its retries.

    ``attempts`` is how many requests were sent before giving up (each may have cost tokens).
    """

    attempts: int = 1


class ModelAuthError(ModelError):
    """The model endpoint rejected the credentials (bad or missing API key)."""


class ModelNotFoundError(ModelError):
    """The endpoint does not serve the configured model name."""


class ConfigError(MemoryScopeError):
    """The settings are invalid or name an optional extra that is not installed."""
