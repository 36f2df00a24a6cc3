"""The per-user lease as a commit sees it: which worker must hold it, and the one rule every
backend applies inside its commit transaction (PostgreSQL: the lease row locked ``FOR UPDATE``;
SQLite: under the write lock; Elasticsearch: the lease document's version checked in the same
bulk request) before a fenced `commit_consolidation` writes anything."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LeaseLostError


@dataclass(frozen=True, slots=True)
class Lease:
    """The lease a fenced commit needs: `owner` must hold `user_id`'s lease, unexpired."""

    user_id: str
    owner: str


def require_held(lease: Lease, holder: str | None, live: bool) -> None:
    """Raise `LeaseLostError` unless the stored lease (`holder` None: there is none) belongs to
    `lease.owner` and has not expired (`live`)."""
    if holder is None:
        raise LeaseLostError("the user's lease is gone (expired and released, or the user deleted); not committing")
    if holder != lease.owner:
        raise LeaseLostError("the user's lease was taken over by another worker; not committing")
    if not live:
        raise LeaseLostError("the user's lease expired before the commit; not committing")
