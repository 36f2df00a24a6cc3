"""Writing a file the user names without damaging what is there (export, the server's key file).

What the path is decides how it is written:

- ``-``: standard output, written directly (UTF-8).
- a regular file: a temporary file beside it is written, flushed to disk and renamed over it, so a
  failure never leaves a truncated file; the file keeps its mode (and, when we may, its owner).
  A hard-linked file gets a new inode, as with any atomic replace: the other names keep the old
  content.
- a path that does not exist yet, in an existing folder: created the same way, with mode 0600
  (memories are private).
- a symbolic link: written through. Its final target (links followed, up to 40) is written by the
  rules here and the link is kept. A link whose target does not exist creates the target, as
  ``open()`` and shell redirection do, when the target's folder exists.
- a character device (``/dev/stdout``, a terminal, a null device) or a FIFO: opened and written
  directly, no temporary file, nothing renamed.
- anything else (a folder, a block device, a socket) is refused.

Every refusal, an invalid path (a NUL, too long, not text, a missing folder, a link loop) and a
failed write raise `ValidationError`.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

from .errors import MemoryScopeError, ValidationError

MAX_LINK_HOPS = 40  # as Linux's own limit for a path's symbolic links
STDOUT = "-"


@contextlib.contextmanager
def open_for_writing(destination: str | os.PathLike[str], *, what: str = "export", streams: bool = True,
                     mode: int | None = None) -> Iterator[IO[str]]:
    """A UTF-8 text handle for `destination`, written by the rules in this module's docstring.

    The content is in place when the ``with`` block ends without an exception; after an exception
    a regular file is left as it was. `streams=False` refuses ``-``, devices and FIFOs (for a file
    that must be read back). `mode` forces the permission bits of a regular file (default: an
    existing file's own, 0600 for a new one).
    """
    path = _checked_path(destination, what)
    if path == STDOUT:
        if not streams:
            raise ValidationError(f"cannot write the {what} to standard output")
        with _stdout() as handle:
            yield handle
        return
    target, info = _final_target(path, what)
    if info is None or stat.S_ISREG(info.st_mode):
        with _replace_atomically(target, info, what, mode) as handle:
            yield handle
        return
    if stat.S_ISDIR(info.st_mode):
        raise ValidationError(f"cannot write the {what} to {path}: it is a folder")
    if streams and (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        with _write_directly(target, what) as handle:
            yield handle
        return
    raise ValidationError(f"cannot write the {what} to {path}: it is a {_kind(info.st_mode)}, "
                          f"not a regular file{', a character device or a FIFO' if streams else ''}")


def _checked_path(destination: object, what: str) -> str:
    if not isinstance(destination, (str, os.PathLike)):
        raise ValidationError(f"the {what} destination must be a path")
    try:
        path = os.fspath(destination)
    except TypeError:
        raise ValidationError(f"the {what} destination is not a valid path") from None
    if not isinstance(path, str) or not path:
        raise ValidationError(f"the {what} destination must be a non-empty text path")
    if "\x00" in path:
        raise ValidationError(f"the {what} destination contains a NUL character")
    try:
        os.fsencode(path)
    except UnicodeError:
        raise ValidationError(f"the {what} destination is not a valid file name here") from None
    return path


def _lstat(path: str, what: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot write the {what} to {path}: {_reason(exc)}") from None


def _final_target(path: str, what: str) -> tuple[str, os.stat_result | None]:
    """The path after following symbolic links, and its status (None: it does not exist)."""
    target = path
    for _ in range(MAX_LINK_HOPS + 1):
        info = _lstat(target, what)
        if info is None or not stat.S_ISLNK(info.st_mode):
            break
        try:
            link = os.readlink(target)
        except OSError as exc:
            raise ValidationError(f"cannot write the {what} to {path}: {_reason(exc)}") from None
        target = os.path.join(os.path.dirname(target), link)
    else:
        raise ValidationError(f"cannot write the {what} to {path}: too many levels of symbolic links")
    if info is None:
        folder = os.path.dirname(target) or "."
        if target.endswith(os.sep) or not os.path.isdir(folder):
            raise ValidationError(f"cannot write the {what} to {path}: the folder {folder} does not exist")
    return target, info


@contextlib.contextmanager
def _replace_atomically(target: str, existing: os.stat_result | None, what: str,
                        mode: int | None) -> Iterator[IO[str]]:
    folder, name = os.path.split(target)
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{name[:64]}.", suffix=".part", dir=folder or ".")
    except OSError as exc:
        raise ValidationError(f"cannot write the {what} in {folder or '.'}: {_reason(exc)}") from None
    try:
        if mode is not None:
            os.chmod(temporary, mode)
        elif existing is not None:
            os.chmod(temporary, stat.S_IMODE(existing.st_mode))
        if existing is not None and hasattr(os, "fchown") and existing.st_uid != os.geteuid():
            with contextlib.suppress(OSError):  # only root may give a file away
                os.fchown(fd, existing.st_uid, existing.st_gid)
        with open(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise ValidationError(f"cannot write the {what} to {target}: {_reason(exc)}") from None
        raise


@contextlib.contextmanager
def _write_directly(target: str, what: str) -> Iterator[IO[str]]:
    try:  # no O_CREAT, no O_TRUNC: the node is used as it is
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ValidationError(f"cannot write the {what} to {target}: {_reason(exc)}") from None
    try:
        kind = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(kind) or stat.S_ISFIFO(kind)):  # replaced since we looked
            raise ValidationError(f"cannot write the {what} to {target}: it changed while it was opened")
        with open(fd, "w", encoding="utf-8", newline="\n", closefd=True) as handle:
            fd = -1
            yield handle
    except OSError as exc:
        raise ValidationError(f"cannot write the {what} to {target}: {_reason(exc)}") from None
    finally:
        if fd >= 0:
            os.close(fd)


@contextlib.contextmanager
def _stdout() -> Iterator[IO[str]]:
    stream = sys.stdout
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # replaced by a text stream (a notebook, a test): write text to it
            yield stream
            stream.flush()
            return
        stream.flush()
        handle = io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")  # UTF-8 whatever the locale
        try:
            yield handle
            handle.flush()
        finally:
            handle.detach()  # standard output stays open
    except MemoryScopeError:
        raise
    except (OSError, ValueError) as exc:  # closed or broken standard output
        raise ValidationError(f"cannot write to standard output: {_reason(exc)}") from None


def _kind(mode: int) -> str:
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    return "special file"


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


__all__ = ["STDOUT", "open_for_writing"]
