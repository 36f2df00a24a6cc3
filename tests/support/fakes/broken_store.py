"""A store whose every call fails, for the adapters' `on_error` tests."""

from __future__ import annotations

from typing import Any

from memoryscope_plugins.errors import StoreError


class BrokenStore:
    """Wraps a real store: `close()` still works (the engine closes it), everything else raises
    `StoreError`."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def close(self) -> None:
        self._real.close()

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("store unavailable")
        return fail
