"""The store backends by name (`settings.store.backend`), each opened from `StoreSettings` by a
factory. The built-in server backends import their drivers only when asked for, so a missing
optional package is a `ConfigError` naming the extra to install, not an import error at start-up.

    store = build_store(settings.store, embedding_model="all-MiniLM-L6-v2")

A new backend registers a factory: ``register_backend("mine", lambda cfg, model: MyStore(...))``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConfigError
from .base import MemoryStore

if TYPE_CHECKING:
    from ..settings import StoreSettings

# (settings.store, embedding model name) -> an open store
StoreFactory = Callable[["StoreSettings", "str | None"], MemoryStore]


def _lazy(module: str, class_name: str, extra: str | None) -> StoreFactory:
    """A factory that imports `module` when first called and opens `class_name.from_settings`."""
    def factory(cfg: StoreSettings, embedding_model: str | None) -> MemoryStore:
        try:
            store_class: Any = getattr(import_module(module, __package__), class_name)
        except ImportError as exc:
            if extra is None:
                raise
            raise ConfigError(f"the {extra} backend needs: pip install 'memoryscope-plugins[{extra}]'") from exc
        return store_class.from_settings(cfg, embedding_model=embedding_model)
    return factory


_FACTORIES: dict[str, StoreFactory] = {
    "sqlite": _lazy(".sqlite_store", "SQLiteStore", None),
    "postgres": _lazy(".postgres_store", "PostgresStore", "postgres"),
    "elasticsearch": _lazy(".elasticsearch_store", "ElasticsearchStore", "elasticsearch"),
}


def register_backend(name: str, factory: StoreFactory) -> None:
    """Make `name` a store backend (replacing one of that name)."""
    _FACTORIES[name] = factory


def backend_names() -> tuple[str, ...]:
    """The names `build_store` knows."""
    return tuple(_FACTORIES)


def check_store_exists(cfg: StoreSettings) -> None:
    """`ConfigError` when `cfg` names a SQLite file that is not there: opening it would create an empty
    store, which a command that reads or changes what a store holds (or a migration's source) must not do
    on a mistyped path. A server backend has no file to look for: a wrong URL fails when it is opened."""
    if cfg.backend == "sqlite" and not cfg.sqlite_path().is_file():
        raise ConfigError(f"no SQLite store at {cfg.sqlite_path()}")


def build_store(cfg: StoreSettings, *, embedding_model: str | None = None) -> MemoryStore:
    """Open the store `cfg.backend` names; `ConfigError` for an unknown name or a missing driver."""
    factory = _FACTORIES.get(cfg.backend)
    if factory is None:
        raise ConfigError(f"unknown store backend {cfg.backend!r}; known: {', '.join(_FACTORIES)}")
    return factory(cfg, embedding_model)
