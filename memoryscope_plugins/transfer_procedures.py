"""Export and import of an agent's procedures (of one team) as JSON Lines: the file handling behind
`MemoryScope.export_procedures` / `import_procedures` (docs/procedural.md, "Export and import").

A line is a procedure as `Memory.to_dict` writes it, marked ``"record": "procedure"`` (a user's
import refuses such a line, and this import refuses a user's lines): active and expired ones, so the
``superseded_by`` links come along. Its ``user_id`` is the agent's scope (``~procedures~<team>:<agent>``);
the server's export leaves it out (a line without it is of the scope it is imported into).

Import checks every line before anything is written, and refuses the whole file (`ValidationError`
naming the line) when a line is not a procedure, is of another agent or team, repeats an id of the
file, or holds fields a procedure cannot hold: ``when`` and ``do`` not blank, each text at most
`procedures.run.MAX_FIELD_CHARS` characters, ``tools`` a non-empty list of tool names, the counters whole numbers
from 0, and no prompt markup, e-mail address or phone-like number (as an edit is checked). The content is
rewritten from the fields (as learning and an edit write it) and the weight from the counters, so no
text reaches retrieval that the fields do not hold.

Ids follow the rule of a user's import (`transfer.import_ids`): an id is kept when it already names one
of the scope's procedures (a re-import updates in place, twice is once), else it becomes a stable id
derived from the scope and the id; ``superseded_by`` and ``metadata["replaces"]`` are mapped alike.
``source_ids`` (the runs' messages in their users' logs) are kept as they are.
"""

from __future__ import annotations

from typing import Any, Iterator

from . import tool_calls
from .errors import ValidationError
from .procedures.edit import refusal
from .procedures.run import MAX_FIELD_CHARS, Proposed
from .procedures.step import content_of, weight
from .storage.base import MemoryStore
from .transfer import derived_id, json_line, json_records
from .types import Memory, MemoryStatus, MemoryType
from .validation import check_text, memory_from_record

RECORD = "procedure"
COUNTERS = ("runs", "uses", "successes", "failures")


def export_lines(store: MemoryStore, scope: str, *, with_scope: bool = True) -> Iterator[tuple[bool, str]]:
    """(True, line) for every procedure of the scope, active and expired, in the store's order; without
    its ``user_id`` (the scope, which names the team) unless `with_scope` (the server hides it)."""
    for batch in store.iter_memories(scope):
        for memory in batch:
            if memory.type is MemoryType.PROCEDURE:
                data = memory.to_dict()
                if not with_scope:
                    del data["user_id"]
                yield True, json_line({"record": RECORD, **data})


def read_procedures(source: Any, scope: str, agent_id: str, *, max_content_chars: int,
                    max_metadata_chars: int) -> list[Memory]:
    """Every procedure of a JSON Lines source, checked as the agent's (`agent_id`) of the scope, ids as
    the file gives them; `ValidationError` naming the first bad line (see the module docstring)."""
    out: list[Memory] = []
    seen: set[str] = set()
    for number, data in json_records(source):
        try:
            memory = _procedure(data, scope, agent_id, max_content_chars, max_metadata_chars)
            if memory.id in seen:
                raise ValidationError(f"the id {memory.id!r} is given twice")
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {exc}; nothing was imported") from None
        seen.add(memory.id)
        out.append(memory)
    return out


def _procedure(data: Any, scope: str, agent_id: str, max_content_chars: int, max_metadata_chars: int) -> Memory:
    if not isinstance(data, dict) or data.get("record") != RECORD:
        raise ValidationError(f"not a procedure (a line of an agent's procedures has \"record\": \"{RECORD}\")")
    if data.get("user_id", scope) != scope or data.get("agent_id") != agent_id:
        raise ValidationError("a procedure of another agent or team")
    fields = {k: v for k, v in data.items() if k not in ("record", "user_id", "embedding_model")}
    memory = memory_from_record(fields, user_id=scope, max_content_chars=max_content_chars,
                                max_metadata_chars=max_metadata_chars)
    if memory.type is not MemoryType.PROCEDURE:
        raise ValidationError("type must be 'procedure'")
    if memory.status not in (MemoryStatus.ACTIVE, MemoryStatus.EXPIRED):
        raise ValidationError("status must be 'active' or 'expired'")
    meta = dict(memory.metadata)
    when, do = (" ".join(check_text(meta.get(k), k, MAX_FIELD_CHARS).split()) for k in ("when", "do"))
    why = meta.get("why") or ""
    why = " ".join(check_text(why, "why", MAX_FIELD_CHARS).split()) if why else ""
    tools = meta.get("tools")
    if not isinstance(tools, list) or not tools or not all(
            isinstance(t, str) and tool_calls.TOOL_NAME_PATTERN.fullmatch(t) for t in tools):
        raise ValidationError("metadata tools must be a non-empty list of tool names")
    for name in COUNTERS:
        value = meta.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(f"metadata {name} must be a whole number from 0")
    reason = refusal(when, do, why, tools, old_tools=tools, old_text=" ".join((when, do, why)))
    if reason is not None:
        raise ValidationError(f"the procedure {reason}")
    meta.update({"when": when, "do": do, "why": why, "tools": sorted(set(tools))})
    meta["weight"] = weight(meta)
    memory.metadata = meta
    memory.content = content_of(Proposed(when=when, do=do, why=why, tools=tools), str(meta.get("language") or "en"))
    return memory


def import_ids(procedures: list[Memory], scope: str, own: set[str]) -> None:
    """Give the procedures their stored ids in place: kept when `own` (already the scope's), else
    derived from the scope and the id; ``superseded_by`` and ``metadata["replaces"]`` alike."""
    def stored(name: str) -> str:
        return name if name in own else derived_id(scope, name)

    for memory in procedures:
        memory.id = stored(memory.id)
        if memory.superseded_by is not None:
            memory.superseded_by = stored(memory.superseded_by)
        replaces = memory.metadata.get("replaces")
        if isinstance(replaces, str):
            memory.metadata["replaces"] = stored(replaces)


def named_ids(procedures: list[Memory]) -> list[str]:
    """The procedure ids the file names (its own, ``superseded_by``, ``replaces``), each once."""
    seen: dict[str, None] = {}
    for memory in procedures:
        for name in (memory.id, memory.superseded_by, memory.metadata.get("replaces")):
            if isinstance(name, str):
                seen.setdefault(name)
    return list(seen)
