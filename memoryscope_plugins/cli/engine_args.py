"""The command-line options every subcommand shares (``--config``, ``--store``, ``-v``, ``--log-format``),
an engine from them.

The lower layer of the command line: `cli.main` and `server.cli` both use it, so neither imports the other.
The shared options are accepted before the subcommand and after it (``memoryscope-plugins --config F serve``
and ``memoryscope-plugins serve --config F`` are the same); given in both places, the later one wins.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..log_format import FORMATS

if TYPE_CHECKING:
    from ..engine import MemoryScope
    from ..settings import Settings


def add_shared_options(parser: argparse.ArgumentParser, *, on_subcommand: bool = False) -> None:
    """Add ``--config``, ``--store``, ``-v`` and ``--log-format`` to `parser`. On a subcommand they have no default
    (argparse copies a subcommand's defaults over the main parser's values), so there they only
    replace what was given before the subcommand when they are given themselves."""
    unset = argparse.SUPPRESS if on_subcommand else None
    parser.add_argument("--config", default=unset, help="YAML settings file (also $MEMORYSCOPE_CONFIG)")
    parser.add_argument("--store", default=unset,
                        help="SQLite store file (default memory.db in $MEMORYSCOPE_HOME, else in ~/.memoryscope)")
    parser.add_argument("-v", "--verbose", action="store_true", default=unset if on_subcommand else False,
                        help="log at INFO level")
    parser.add_argument("--log-format", choices=FORMATS, default=unset if on_subcommand else "text",
                        help="log lines as text (default) or as JSON objects for log collectors")


def add_metrics_options(parser: argparse.ArgumentParser, help: str) -> None:
    """``--metrics-port`` (described by `help`) and ``--metrics-host``: a Prometheus scrape on a bind
    address of its own (``serve`` and ``worker``)."""
    parser.add_argument("--metrics-port", type=int, default=None, metavar="PORT", help=help)
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="bind address of --metrics-port (default %(default)s: this machine only)")


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type=``: an integer from `low` to `high`. Anything else is a usage error naming the
    option (exit status 2) before the command runs, not a value the command quietly changes."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value
    return parse


class CommandGroup:
    """A group of subcommands whose every parser also takes the shared options: what the command
    modules receive as ``sub`` (its ``add_parser`` is argparse's, with the shared options added)."""

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers
        self._shared = argparse.ArgumentParser(add_help=False)
        add_shared_options(self._shared, on_subcommand=True)

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self._subparsers.add_parser(name, parents=[self._shared], **kwargs)

    def add_group(self, parser: argparse.ArgumentParser, **kwargs: Any) -> CommandGroup:
        """Subcommands of `parser` (``bench locomo``, ...), taking the shared options as well."""
        return CommandGroup(parser.add_subparsers(**kwargs))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings file named by ``--config`` (else the environment), with ``--store`` as the SQLite file."""
    from ..settings import Settings
    settings = Settings.load(args.config) if args.config else Settings()
    if args.store:
        settings = settings.model_copy(update={"store": settings.store.model_copy(
            update={"backend": "sqlite", "path": Path(args.store)})})
    return settings


def engine_from_args(args: argparse.Namespace, **kwargs: Any) -> MemoryScope:
    """An engine on `settings_from_args`; `kwargs` go to `MemoryScope` (models, a store)."""
    from ..engine import MemoryScope
    return MemoryScope(settings_from_args(args), **kwargs)


def existing_engine(args: argparse.Namespace, *, user: str | None = None) -> MemoryScope:
    """`engine_from_args` on a store that must already be there (`ConfigError` "no SQLite store at ..."
    otherwise): the engine of the commands that read or change what a store holds, so a mistyped
    ``--store`` is an error rather than a new, empty store. With `user`, the store must hold that user
    too (`NotFoundError` "no user ... in this store" otherwise): one answer, exit status 1, from every
    command that reads or changes a user's records."""
    from ..engine import MemoryScope
    from ..errors import NotFoundError
    from ..storage.registry import check_store_exists
    settings = settings_from_args(args)
    check_store_exists(settings.store)
    engine = MemoryScope(settings)
    if user is not None and not _holds_user(engine, user):
        engine.close()
        raise NotFoundError(f"no user {user!r} in this store (`memoryscope-plugins users` lists them)")
    return engine


def _holds_user(engine: MemoryScope, user: str) -> bool:
    """The store holds something of `user`: memories or messages (`users`), or only a profile set by hand
    or entities (``set-profile`` on a new user writes no memory)."""
    return user in engine.users() or bool(engine.profile(user)) or bool(engine.entities(user, limit=1))
