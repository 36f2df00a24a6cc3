"""Where a read may be served from, for stores with read replicas (``store.read_urls``).

Reads go to the primary unless the caller opens a `reads_from("replica")` block: the engine's
read calls (`retrieve`, `list`, `count`, `get`) and serve's store overview do, unless their caller
asks for ``consistency="primary"``. Everything else (writes, the reads inside a write,
consolidation, leases, the message log) reads the primary. The choice is a context variable: it
holds in this thread or task, and `asyncio.to_thread` (the async twins) carries it along.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Literal, get_args

from ..errors import ValidationError

Consistency = Literal["replica", "primary"]
CONSISTENCIES: tuple[str, ...] = get_args(Consistency)

_READS_FROM: contextvars.ContextVar[Consistency] = contextvars.ContextVar("memoryscope_reads_from",
                                                                          default="primary")


def check(value: object) -> Consistency:
    """`value` as a `Consistency`; `ValidationError` for anything else."""
    if not isinstance(value, str) or value not in CONSISTENCIES:
        raise ValidationError(f"consistency must be one of {', '.join(CONSISTENCIES)}")
    return value  # type: ignore[return-value]


@contextlib.contextmanager
def reads_from(consistency: Consistency) -> Iterator[None]:
    """Inside this block (this thread or task), a store with read replicas serves its reads of
    records (search, get, list, count, the ledger reads, the overview) from a standby when
    `consistency` is ``"replica"``; ``"primary"`` keeps them on the primary."""
    token = _READS_FROM.set(check(consistency))
    try:
        yield
    finally:
        _READS_FROM.reset(token)


def current() -> Consistency:
    """The consistency in force here (``"primary"`` outside any `reads_from` block)."""
    return _READS_FROM.get()
