"""Memory as a service: an HTTP API, an MCP server and a memory browser over one `MemoryScope`.

Install with ``pip install 'memoryscope-plugins[server]'`` and run ``memoryscope-plugins serve``.
"""

from .app import ServerConfig, create_app
from .auth import ApiKey, KeyRing

__all__ = ["ApiKey", "KeyRing", "ServerConfig", "create_app"]
