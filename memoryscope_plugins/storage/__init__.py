"""Memory stores: the protocol and the embedded SQLite default (server stores import lazily).

The layer: `base` (the `MemoryStore` protocol and its data types), `core.StoreBase` (the protocol
built on the primitives a backend implements), what every backend shares written once (`records`:
columns and row conversion; `timecodes`; `filtering.matches`: the filter semantics; `messages`:
message states; `term_index`: BM25), the backends (`sqlite_store`, `postgres_store`,
`elasticsearch_store`), and `registry.build_store`, which opens the one the settings name.
docs/storage.md lists the primitives a new backend implements.
"""

from .base import Candidate, MemoryFilter, MemoryStore, SearchRequest, StoredMessage
from .sqlite_store import SQLiteStore

__all__ = ["Candidate", "MemoryFilter", "MemoryStore", "SearchRequest", "StoredMessage", "SQLiteStore"]
