"""Export and import as JSON Lines: the file handling behind `MemoryScope.export` / `import_`.

Export to a path never damages what is there (`safe_write`): a regular file is replaced atomically
(a temporary file beside it, renamed into place when every line is written, so a failure never
leaves a truncated file), a symbolic link is written through, a character device, a FIFO or ``-``
(standard output) is written directly, and anything else is refused. Lines are UTF-8 JSON; a string the
store holds that is not valid Unicode (a lone surrogate written by an older version) is escaped
(``\\udc80``) instead of failing the export. Import decodes and checks every line before the caller
writes anything.

Ids on import (`import_ids`): an id a line gives (its own, and those it refers to: previous_id,
superseded_by, source_ids) is kept only when it already names one of the importing user's memories
(a re-import of the user's own export). Every other id becomes ``derived_id(user, id)``, a stable
UUID of the user and the id, whether or not another user or tenant holds a memory with that id: the
caller cannot tell the two apart (no id oracle), a re-import of the same file is idempotent, and
references inside the file stay consistent.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from typing import Any, Iterable, Iterator, NamedTuple

from .errors import ValidationError
from .safe_write import open_for_writing
from .storage.base import MemoryStore
from .types import Memory
from .validation import memory_from_record

MAX_LINE_CHARS = 16 * 1024 * 1024  # one memory: content + metadata + context stay far below this
_LINE_BREAKS = {code: f"\\u{code:04x}" for code in (0x0B, 0x0C, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


def memory_line(memory: Memory) -> str:
    """One JSON line (with its newline) for a memory; always encodable as UTF-8."""
    line = json.dumps(memory.to_dict(), ensure_ascii=False, default=str)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: \\u escapes are valid JSON and round-trip
        line = json.dumps(memory.to_dict(), ensure_ascii=True, default=str)
    # characters other tools take for line breaks (str.splitlines, JavaScript) are escaped, so
    # one memory is always exactly one line
    return line.translate(_LINE_BREAKS) + "\n"


def _lines(store: MemoryStore, user_id: str) -> Iterator[str]:
    for batch in store.iter_memories(user_id):
        for memory in batch:
            yield memory_line(memory)


def export_to_path(store: MemoryStore, user_id: str, destination: str | os.PathLike[str]) -> int:
    """Write a user's memories to a path by the rules of `safe_write` (``-`` is standard output)."""
    count = 0
    with open_for_writing(destination, what="export") as handle:
        for line in _lines(store, user_id):
            handle.write(line)
            count += 1
    return count


def export_to_stream(store: MemoryStore, user_id: str, stream: Any) -> int:
    if not hasattr(stream, "write"):
        raise ValidationError("export destination must be a path or a writable file object")
    binary = _is_binary(stream, "w")
    count = 0
    try:
        for line in _lines(store, user_id):
            stream.write(line.encode("utf-8") if binary else line)
            count += 1
    except (OSError, ValueError) as exc:  # closed or read-only streams
        raise ValidationError(f"cannot write to the export stream: {type(exc).__name__}") from None
    return count


def _is_binary(stream: Any, mode: str) -> bool:
    if isinstance(stream, io.TextIOBase):
        return False
    if isinstance(stream, (io.RawIOBase, io.BufferedIOBase)):
        return True
    return "b" in str(getattr(stream, "mode", ""))


def _read_text(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as handle:
                raw = handle.read()
        except (OSError, ValueError, TypeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise ValidationError(f"cannot read the import file: {reason}") from None
    elif hasattr(source, "read"):
        try:
            raw = source.read()
        except (OSError, ValueError) as exc:
            raise ValidationError(f"cannot read the import stream: {type(exc).__name__}") from None
        except UnicodeDecodeError:
            raise ValidationError("the import stream is not valid UTF-8") from None
    else:
        raise ValidationError("import source must be a path or a readable file object")
    if isinstance(raw, (bytes, bytearray)):
        try:
            return bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw[:exc.start].count(b"\n") + 1
            raise ValidationError(f"line {line}: not valid UTF-8 (byte {exc.start}); nothing was imported") from None
    if not isinstance(raw, str):
        raise ValidationError("the import source returned neither text nor bytes")
    return raw


def read_memories(source: Any, user_id: str, *, max_content_chars: int, max_metadata_chars: int) -> list[Memory]:
    """Every memory of a JSON Lines source, checked; `ValidationError` naming the first bad line."""
    memories: list[Memory] = []
    for number, line in enumerate(_read_text(source).split("\n"), start=1):  # not splitlines: see memory_line
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise ValidationError(f"line {number}: longer than {MAX_LINE_CHARS} characters; nothing was imported")
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            raise ValidationError(f"line {number}: not valid JSON; nothing was imported") from None
        try:
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "embedding_model"}
                data.pop("user_id", None)  # the importing user's; which ids are kept: see import_ids
            memories.append(memory_from_record(data, user_id=user_id, max_content_chars=max_content_chars,
                                               max_metadata_chars=max_metadata_chars))
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {exc}; nothing was imported") from None
    return memories


class ImportResult(NamedTuple):
    """What an import stored: how many lines, and the stored id of every id the lines named."""

    imported: int
    ids: dict[str, str]


def derived_id(user_id: str, memory_id: str) -> str:
    """The id an imported memory id becomes for `user_id` when it is not already that user's."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{user_id}/{memory_id}").hex


def named_ids(memories: Iterable[Memory]) -> list[str]:
    """Every id the imported memories name (their own and their references), each once, in order."""
    seen: dict[str, None] = {}
    for memory in memories:
        for name in (memory.id, memory.previous_id, memory.superseded_by, *memory.source_ids):
            if name is not None:
                seen.setdefault(name)
    return list(seen)


def import_ids(memories: list[Memory], user_id: str, own: set[str]) -> dict[str, str]:
    """Give `memories` their stored ids in place and return the mapping for every id they named.

    `own`: which of those ids are already memories of `user_id` (found by a lookup scoped to that
    user, so nothing about other users' ids can change the outcome)."""
    mapping = {name: name if name in own else derived_id(user_id, name) for name in named_ids(memories)}
    for memory in memories:
        memory.id = mapping[memory.id]
        if memory.previous_id is not None:
            memory.previous_id = mapping[memory.previous_id]
        if memory.superseded_by is not None:
            memory.superseded_by = mapping[memory.superseded_by]
        memory.source_ids = [mapping[name] for name in memory.source_ids]
    return mapping


__all__ = ["ImportResult", "derived_id", "export_to_path", "export_to_stream", "import_ids", "memory_line", "named_ids",
           "read_memories"]
