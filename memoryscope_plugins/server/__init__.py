"""Memory as a service: an HTTP API, an MCP server and a memory browser over one `MemoryScope`.

Install with ``pip install 'memoryscope-plugins[server]'`` and run ``memoryscope-plugins serve``.
Names are imported lazily, so the CLI works (and says what to install) without the extra.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApiKey", "KeyRing", "ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name in ("ServerConfig", "create_app"):
        from . import app
        return getattr(app, name)
    if name in ("ApiKey", "KeyRing"):
        from . import auth
        return getattr(auth, name)
    raise AttributeError(name)
