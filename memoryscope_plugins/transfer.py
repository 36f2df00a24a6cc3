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

The entity ledger and the profile follow the memories, one item a line, each line marked by its
``record`` field: ``"entity"`` (id, name, kind, aliases, times, metadata), ``"mention"``
(entity_id, memory_id, said_at, event_at, counted) and ``"profile"`` (a `ProfileValue` without its
user). A line without ``record`` is a memory, so an export written before the ledger imports as it
always did. On import, entity and profile ids follow the rule above for memory ids (kept when
already the user's, else derived), and the memory ids a mention or a profile value names are mapped
with the memories'; a mention of a memory or an entity that is neither in the file nor the user's
is refused.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import uuid
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from . import transfer_tools, validation
from .errors import ValidationError
from .safe_write import open_for_writing
from .storage.base import LedgerChanges, MemoryStore, StoredMessage, VectorRows
from .types import Entity, EntityKind, EntityMention, Memory, ProfileValue
from .validation import memory_from_record

MAX_LINE_CHARS = 16 * 1024 * 1024  # one memory: content + metadata + context stay far below this
_LINE_BREAKS = {code: f"\\u{code:04x}" for code in (0x0B, 0x0C, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


def memory_line(memory: Memory) -> str:
    """One JSON line (with its newline) for a memory; always encodable as UTF-8."""
    return _json_line(memory.to_dict())


def _json_line(data: dict[str, Any]) -> str:
    line = json.dumps(data, ensure_ascii=False, default=str)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: \\u escapes are valid JSON and round-trip
        line = json.dumps(data, ensure_ascii=True, default=str)
    # characters other tools take for line breaks (str.splitlines, JavaScript) are escaped, so
    # one memory is always exactly one line
    return line.translate(_LINE_BREAKS) + "\n"


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat()


def ledger_lines(store: MemoryStore, user_id: str) -> Iterator[str]:
    """The user's entities, mentions and profile values as JSON lines (see the module docstring)."""
    for e in store.entities(user_id):
        yield _json_line({"record": "entity", "id": e.id, "name": e.name, "kind": EntityKind(e.kind).value,
                          "aliases": list(e.aliases), "created_at": _iso(e.created_at),
                          "updated_at": _iso(e.updated_at), "metadata": e.metadata})
    for m in store.mentions(user_id):
        yield _json_line({"record": "mention", "entity_id": m.entity_id, "memory_id": m.memory_id,
                          "said_at": _iso(m.said_at), "event_at": _iso(m.event_at), "counted": m.counted})
    for v in store.profile_values(user_id):
        yield _json_line({"record": "profile", "id": v.id, "key": v.key, "value": v.value,
                          "valid_from": _iso(v.valid_from), "valid_to": _iso(v.valid_to),
                          "source_ids": list(v.source_ids), "set_by": v.set_by, "superseded_by": v.superseded_by,
                          "created_at": _iso(v.created_at), "updated_at": _iso(v.updated_at)})


def _lines(store: MemoryStore, user_id: str) -> Iterator[tuple[bool, str]]:
    """Every line of a user's export, each with whether it is a memory."""
    for batch in store.iter_memories(user_id):
        for memory in batch:
            yield True, memory_line(memory)
    for line in ledger_lines(store, user_id):
        yield False, line
    for record in transfer_tools.tool_call_records(store, user_id):
        yield False, _json_line(record)


def export_to_path(store: MemoryStore, user_id: str, destination: str | os.PathLike[str]) -> int:
    """Write a user's memories (then ledger and profile) to a path by the rules of `safe_write`
    (``-`` is standard output); returns how many memories."""
    return write_to_path(_lines(store, user_id), destination)


def export_to_stream(store: MemoryStore, user_id: str, stream: Any) -> int:
    return write_to_stream(_lines(store, user_id), stream)


def write_to_path(lines: Iterable[tuple[bool, str]], destination: str | os.PathLike[str]) -> int:
    """Write (counted, line) pairs to a path by the rules of `safe_write`; returns how many were counted."""
    count = 0
    with open_for_writing(destination, what="export") as handle:
        for counted, line in lines:
            handle.write(line)
            count += counted
    return count


def write_to_stream(lines: Iterable[tuple[bool, str]], stream: Any) -> int:
    """Write (counted, line) pairs to a text or binary stream (UTF-8); returns how many were counted."""
    if not hasattr(stream, "write"):
        raise ValidationError("export destination must be a path or a writable file object")
    binary = _is_binary(stream, "w")
    count = 0
    try:
        for counted, line in lines:
            stream.write(line.encode("utf-8") if binary else line)
            count += counted
    except (OSError, ValueError) as exc:  # closed or read-only streams
        raise ValidationError(f"cannot write to the export stream: {type(exc).__name__}") from None
    return count


def _is_binary(stream: Any, mode: str) -> bool:
    if isinstance(stream, io.TextIOBase):
        return False
    if isinstance(stream, (io.RawIOBase, io.BufferedIOBase)):
        return True
    return "b" in str(getattr(stream, "mode", ""))


def json_records(source: Any) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of each non-blank line of a JSON Lines source; `ValidationError`
    naming the line when one is too long or not JSON."""
    for number, line in enumerate(_read_text(source).split("\n"), start=1):  # not splitlines: see memory_line
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise ValidationError(f"line {number}: longer than {MAX_LINE_CHARS} characters; nothing was imported")
        try:
            yield number, json.loads(line)
        except (ValueError, RecursionError):
            raise ValidationError(f"line {number}: not valid JSON; nothing was imported") from None


def json_line(data: dict[str, Any]) -> str:
    """One JSON line (with its newline), always encodable as UTF-8 and never split by other line breaks."""
    return _json_line(data)


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
    return read_export(source, user_id, max_content_chars=max_content_chars,
                       max_metadata_chars=max_metadata_chars).memories


class ExportContents(NamedTuple):
    """What an export file holds: its memories, its ledger and profile (as the file names them) and
    the agents' tool calls (`transfer_tools`, ids as the file gives them)."""

    memories: list[Memory]
    ledger: LedgerChanges
    tool_calls: list[StoredMessage]


def read_export(source: Any, user_id: str, *, max_content_chars: int, max_metadata_chars: int) -> ExportContents:
    """Every memory, entity, mention and profile value of a JSON Lines source, checked, as items of
    `user_id`; `ValidationError` naming the first bad line."""
    memories: list[Memory] = []
    ledger = LedgerChanges(user_id, entities=[], mentions=[], profile=[])
    calls: list[StoredMessage] = []
    seen_ids: set[str] = set()
    for number, data in json_records(source):
        try:
            if isinstance(data, dict) and data.get("record") == "tool_call":
                calls.append(transfer_tools.read_tool_call(data, user_id, max_content_chars=max_content_chars,
                                                           max_metadata_chars=max_metadata_chars))
                continue
            if isinstance(data, dict) and "record" in data:
                _read_ledger_line(data, ledger, max_content_chars, max_metadata_chars)
                continue
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "embedding_model"}
                data.pop("user_id", None)  # the importing user's; which ids are kept: see import_ids
            memory = memory_from_record(data, user_id=user_id, max_content_chars=max_content_chars,
                                        max_metadata_chars=max_metadata_chars)
            if memory.id in seen_ids:  # both would be stored under one id: the first silently lost
                raise ValidationError(f"the memory id {memory.id[:40]!r} is given twice")
            seen_ids.add(memory.id)
            memories.append(memory)
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {exc}; nothing was imported") from None
    return ExportContents(memories, ledger, calls)


_LEDGER_FIELDS = {
    "entity": {"record", "id", "name", "kind", "aliases", "created_at", "updated_at", "metadata"},
    "mention": {"record", "entity_id", "memory_id", "said_at", "event_at", "counted"},
    "profile": {"record", "id", "key", "value", "valid_from", "valid_to", "source_ids", "set_by", "superseded_by",
                "created_at", "updated_at"},
}
MAX_ALIASES = 100


def _read_ledger_line(data: dict[str, Any], ledger: LedgerChanges, max_content_chars: int,
                      max_metadata_chars: int) -> None:
    """Check one ledger line and add its item to `ledger` (lists, as `read_export` made them)."""
    kind = data["record"]
    if not isinstance(kind, str) or kind not in _LEDGER_FIELDS:
        raise ValidationError(f"unknown record {str(kind)[:40]!r} (entity, mention, profile or tool_call)")
    unknown = set(data) - _LEDGER_FIELDS[kind]
    if unknown:
        raise ValidationError(f"unknown {kind} fields: {sorted(str(k)[:40] for k in unknown)}")
    user, v = ledger.user_id, validation
    stamps = {name: v.check_time(data.get(name), name) for name in ("created_at", "updated_at")}
    times: dict[str, Any] = {name: moment for name, moment in stamps.items() if moment is not None}
    if kind == "entity":
        aliases = data.get("aliases") or []
        if not isinstance(aliases, list) or len(aliases) > MAX_ALIASES:
            raise ValidationError(f"aliases must be a list of at most {MAX_ALIASES} names")
        try:
            entity_kind = EntityKind(data.get("kind", EntityKind.TOPIC.value))
        except ValueError:
            raise ValidationError(f"kind must be one of {[k.value for k in EntityKind]}") from None
        _append(ledger.entities, Entity(
            id=v.check_id(data.get("id"), "id"), user_id=user, name=v.check_text(data.get("name"), "name",
                                                                                  v.MAX_NAME_CHARS),
            kind=entity_kind, aliases=[v.check_text(a, "an alias", v.MAX_NAME_CHARS) for a in aliases],
            metadata=v.check_metadata(data.get("metadata"), "metadata", max_metadata_chars), **times))
    elif kind == "mention":
        said = v.check_time(data.get("said_at"), "said_at")
        if said is None:
            raise ValidationError("a mention needs said_at")
        _append(ledger.mentions, EntityMention(
            entity_id=v.check_id(data.get("entity_id"), "entity_id"),
            memory_id=v.check_id(data.get("memory_id"), "memory_id"), user_id=user, said_at=said,
            event_at=v.check_time(data.get("event_at"), "event_at"),
            counted=v.check_bool(data.get("counted", True), "counted")))
    else:
        if data.get("set_by", "model") not in ("model", "user"):
            raise ValidationError("set_by must be 'model' or 'user'")
        _append(ledger.profile, ProfileValue(
            id=v.check_id(data.get("id"), "id"), user_id=user, key=v.check_text(data.get("key"), "key",
                                                                               v.MAX_NAME_CHARS),
            value=v.check_text(data.get("value"), "value", max_content_chars),
            valid_from=v.check_time(data.get("valid_from"), "valid_from"),
            valid_to=v.check_time(data.get("valid_to"), "valid_to"),
            source_ids=v.check_source_ids(data.get("source_ids")), set_by=data.get("set_by", "model"),
            superseded_by=v.check_optional_id(data.get("superseded_by"), "superseded_by"), **times))


def _append(items: Sequence[Any], item: Any) -> None:
    assert isinstance(items, list)  # read_export makes them lists
    items.append(item)


class ImportResult(NamedTuple):
    """What an import stored: how many lines, and the stored id of every id the lines named."""

    imported: int
    ids: dict[str, str]
    tool_calls: int = 0  # tool calls logged (those the user's log held already are not counted again)


def derived_id(user_id: str, memory_id: str) -> str:
    """The id an imported memory id becomes for `user_id` when it is not already that user's."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{user_id}/{memory_id}").hex


def named_ids(memories: Iterable[Memory], ledger: LedgerChanges | None = None) -> list[str]:
    """Every memory id the imported memories (their own and their references) and ledger (the
    memories mentions and profile values name) name, each once, in order."""
    seen: dict[str, None] = {}
    for memory in memories:
        for name in (memory.id, memory.previous_id, memory.superseded_by, *memory.source_ids):
            if name is not None:
                seen.setdefault(name)
    if ledger is not None:
        for mention in ledger.mentions:
            seen.setdefault(mention.memory_id)
        for value in ledger.profile:
            for name in value.source_ids:
                seen.setdefault(name)
    return list(seen)


def import_ids(memories: list[Memory], user_id: str, own: set[str],
               ledger: LedgerChanges | None = None) -> dict[str, str]:
    """Give `memories` their stored ids in place and return the mapping for every id they (and
    the memory references of `ledger`) named.

    `own`: which of those ids are already memories of `user_id` (found by a lookup scoped to that
    user, so nothing about other users' ids can change the outcome)."""
    mapping = {name: name if name in own else derived_id(user_id, name) for name in named_ids(memories, ledger)}
    for memory in memories:
        memory.id = mapping[memory.id]
        if memory.previous_id is not None:
            memory.previous_id = mapping[memory.previous_id]
        if memory.superseded_by is not None:
            memory.superseded_by = mapping[memory.superseded_by]
        memory.source_ids = [mapping[name] for name in memory.source_ids]
    return mapping


def import_ledger_ids(ledger: LedgerChanges, store: MemoryStore, mapping: dict[str, str],
                      memories: Sequence[Memory]) -> LedgerChanges:
    """The file's ledger with the ids it will be stored under: memory ids by `mapping` (from
    `import_ids`, which saw `named_ids(memories, ledger)` and gave `memories` their ids), entity
    and profile ids kept when they are already the user's and derived otherwise (as memory ids
    are). `ValidationError` for a mention of a memory or an entity that is neither in the file
    nor the user's."""
    user = ledger.user_id
    own_entities = {e.id for e in store.entities(user, ids=list({e.id for e in ledger.entities}
                                                                | {m.entity_id for m in ledger.mentions}))}
    own_values = {v.id for v in store.profile_values(user)}
    entity_ids = {i: i if i in own_entities else derived_id(user, i)
                  for i in [*(e.id for e in ledger.entities), *(m.entity_id for m in ledger.mentions)]}
    value_ids = {v.id: v.id if v.id in own_values else derived_id(user, v.id) for v in ledger.profile}
    for v in ledger.profile:
        if v.superseded_by is not None and v.superseded_by not in value_ids:
            value_ids[v.superseded_by] = v.superseded_by if v.superseded_by in own_values else derived_id(
                user, v.superseded_by)
    in_file = {e.id for e in ledger.entities}
    stored = {m.id for m in memories}  # already mapped
    for m in ledger.mentions:
        if m.entity_id not in in_file and m.entity_id not in own_entities:
            raise ValidationError(f"a mention names the entity {m.entity_id!r}, which is neither in the file "
                                  "nor the user's; nothing was imported")
        if mapping[m.memory_id] not in stored and mapping[m.memory_id] != m.memory_id:
            raise ValidationError(f"a mention names the memory {m.memory_id!r}, which is neither in the file "
                                  "nor the user's; nothing was imported")
    return LedgerChanges(
        user,
        entities=[_with(e, id=entity_ids[e.id]) for e in ledger.entities],
        mentions=[_with(m, entity_id=entity_ids[m.entity_id], memory_id=mapping[m.memory_id]) for m in ledger.mentions],
        profile=[_with(v, id=value_ids[v.id], source_ids=[mapping[s] for s in v.source_ids],
                       superseded_by=None if v.superseded_by is None else value_ids[v.superseded_by])
                 for v in ledger.profile])


def _with(item: Any, **changes: Any) -> Any:
    return dataclasses.replace(item, **changes)


def store_import(store: MemoryStore, memories: list[Memory], vectors: VectorRows | None,
                 ledger: LedgerChanges, tool_calls: Sequence[StoredMessage] = ()) -> None:
    """Store an import's memories, ledger and tool calls in one transaction (`commit_consolidation`
    with no messages to mark is a put that carries ledger changes; `copy_messages` logs the calls
    with them); `ValueError` when the store refuses."""
    if tool_calls:
        store.copy_messages(tool_calls, memories, vectors, ledger=ledger or None)
    elif ledger:
        store.commit_consolidation(memories, vectors, (), ledger=ledger)
    elif memories:
        store.put(memories, vectors)


__all__ = ["ExportContents", "ImportResult", "derived_id", "export_to_path", "export_to_stream", "import_ids",
           "import_ledger_ids", "json_line", "json_records", "ledger_lines", "memory_line", "named_ids", "read_export",
           "read_memories", "store_import", "write_to_path", "write_to_stream"]
