"""The entity ledger's precision and recall against hand-labelled turns (issue 27, item 5).

    python bench/entity_ledger.py [--settings llm.yaml] \\
        --set ../shared/data/locomo_dev.json bench/data/entities_en.json \\
        --set ../shared/data/zh_memory_dev.json bench/data/entities_zh.json \\
        [--limit-turns N] [--consolidate session|end] [--out result.json] [--keep DIR]

Without `--settings`, or with a settings file that has no ``llm`` section, the run is record-only:
nothing is consolidated, and the ledger scored is the one `record` builds alone (the speakers and
the names it reads from the messages, `person.record_names`). The Chinese names of the dictionary
need rjieba (the ``multilingual`` extra); the language is read per message (``language: auto``).

For each `--set DATA LABELS` (a LoCoMo-format file and a labels file of `bench/data/`), the labelled
turns (the first turns of each labelled conversation, in session order; with `--limit-turns N` only
the first N labelled turns of each conversation) are recorded into a fresh temporary SQLite store
with `MemoryScope.record`, exactly as `bench qa`'s `consolidated` configuration records them
(`memoryscope_plugins.bench.locomo.ingest`: one user per conversation, one `record` call per turn,
the LoCoMo image caption appended as "[shares ...]"), and, when the settings name a model,
consolidated with it (its `llm` section; consolidation is switched on, no background worker): after each
session by default, so that the names of entities already known are counted at record time as in an
application, or with `--consolidate end` once after all the turns (as `bench qa`'s consolidated
store is built). The ledger is then read back and scored against the labels:

- which turn is which: `ingest` keeps each turn's LoCoMo id in the turn memory's metadata
  (`metadata["dia_id"]`); the turn memories are listed and mapped dia_id -> memory id, and the
  ledger's mentions of that memory (`store.mentions(user, memory_ids=[id])`) are the entities the
  ledger links to that turn (`store.entities(user, ids=...)`: each with its name and aliases);
- mention level (micro over (turn, entity) pairs): a labelled entity and a ledger entity of the same
  turn match when one of the ledger entity's names or aliases equals the label's written name or its
  canonical name after normalisation (NFKC, case folded, a trailing possessive dropped, punctuation
  and spaces folded, a leading "the" dropped), each at most once; precision = matched / ledger
  mentions of the labelled turns, recall = matched / labelled mentions, F1; per language and per kind
  (recall by the label's kind, precision by the ledger entity's kind; `kind_agreement` is the share
  of matches whose kinds agree);
- entity level (per conversation, i.e. per user): precision = the ledger's entities that match a
  labelled entity (any of its names) / the ledger's entities; recall = the labelled entities
  (distinct canonical names) that some ledger entity matches / the labelled entities.

The output lists the misses and the false links per language, so the errors can be read, what
recording cost (`costs`: milliseconds per recorded turn, the embedding included, and per call of
the name step, `person.record_names.new_entities`), and the profile consolidation built for each
conversation (`profiles`: current values and history, printed after the table; not scored, since
the labels hold no profile). The scoring
functions are pure (labels and ledger records in, figures out) and are unit-tested in
tests/bench/test_entity_ledger.py without a model or a store. The labelling rules are in the labels
files' "rules" and in bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from memoryscope_plugins.types import Entity, EntityMention, ProfileValue

KINDS = ("person", "place", "organization", "pet", "object", "topic")


# -- labels ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LabelledEntity:
    """One entity a turn names: as written, its kind, its canonical name (the written name when the
    turn uses the canonical one)."""

    name: str
    kind: str
    canonical: str


@dataclasses.dataclass(frozen=True)
class LabelledTurn:
    conversation: str
    dia_id: str
    speaker: str
    entities: tuple[LabelledEntity, ...]


@dataclasses.dataclass(frozen=True)
class Labels:
    language: str
    turns: tuple[LabelledTurn, ...]


def parse_labels(doc: Mapping[str, Any]) -> Labels:
    """A labels file's content (see bench/data/entities_*.json) as records; raises ValueError on a
    malformed entry (an unknown kind, a missing name, a turn listed twice)."""
    turns = []
    seen: set[tuple[str, str]] = set()
    for raw in doc["turns"]:
        key = (str(raw["conversation"]), str(raw["dia_id"]))
        if key in seen:
            raise ValueError(f"turn {key} is labelled twice")
        seen.add(key)
        entities = []
        for item in raw["entities"]:
            name, kind = str(item.get("name") or "").strip(), str(item.get("kind") or "")
            if not name or kind not in KINDS:
                raise ValueError(f"turn {key}: bad entity {item!r}")
            entities.append(LabelledEntity(name, kind, str(item.get("canonical") or name).strip()))
        turns.append(LabelledTurn(key[0], key[1], str(raw.get("speaker", "")), tuple(entities)))
    return Labels(str(doc.get("language", "")), tuple(turns))


def limit_turns(labels: Labels, per_conversation: int | None) -> Labels:
    """The first `per_conversation` labelled turns of each conversation (all when None)."""
    if per_conversation is None:
        return labels
    kept, counts = [], Counter[str]()
    for turn in labels.turns:
        if counts[turn.conversation] < per_conversation:
            kept.append(turn)
            counts[turn.conversation] += 1
    return Labels(labels.language, tuple(kept))


# -- matching --------------------------------------------------------------------------------------

_POSSESSIVE = re.compile(r"['\u2019]s$")
_FOLD = re.compile(r"[\W_]+")
_ARTICLE = re.compile(r"^the ")


def normalise(name: str) -> str:
    """A name as compared: NFKC, case folded, a trailing possessive dropped ("Mel's" -> "mel"),
    runs of punctuation and spaces folded to one space ("LGBTQ+" -> "lgbtq"), a leading "the"
    dropped ("the Minnesota Wolves" and "Minnesota Wolves" are one name)."""
    text = _POSSESSIVE.sub("", unicodedata.normalize("NFKC", name).strip())
    return _ARTICLE.sub("", _FOLD.sub(" ", text.casefold()).strip())


@dataclasses.dataclass(frozen=True)
class LedgerEntity:
    """A ledger entity as scored: its id, kind and every name it goes by (normalised)."""

    id: str
    name: str
    kind: str
    names: frozenset[str]

    @classmethod
    def of(cls, entity: Entity) -> LedgerEntity:
        names = frozenset(n for n in (normalise(x) for x in entity.names) if n)
        return cls(entity.id, entity.name, getattr(entity.kind, "value", str(entity.kind)), names)


def _label_names(label: LabelledEntity) -> set[str]:
    return {n for n in (normalise(label.name), normalise(label.canonical)) if n}


def match_turn(labels: Sequence[LabelledEntity], found: Sequence[LedgerEntity]
               ) -> tuple[list[tuple[LabelledEntity, LedgerEntity]], list[LabelledEntity], list[LedgerEntity]]:
    """Pairs each labelled entity with at most one ledger entity of the same turn and back:
    (matches, missed labels, false ledger entities). A ledger entity answering to the written
    name is preferred over one answering to the canonical name only."""
    free = list(found)
    matches, missed = [], []
    for label in labels:
        written = normalise(label.name)
        candidates = [e for e in free if _label_names(label) & e.names]
        if not candidates:
            missed.append(label)
            continue
        best = next((e for e in candidates if written in e.names), candidates[0])
        free.remove(best)
        matches.append((label, best))
    return matches, missed, free


def ledger_by_turn(entities: Iterable[Entity], mentions: Iterable[EntityMention],
                   dia_of_memory: Mapping[str, str]) -> dict[str, list[LedgerEntity]]:
    """The ledger entities linked to each turn (by dia_id) of one user: `mentions` whose memory is
    a turn memory of `dia_of_memory` (memory id -> dia_id); other memories' mentions (observations,
    insights) are ignored. An entity linked twice to a turn counts once."""
    by_id = {e.id: LedgerEntity.of(e) for e in entities}
    out: dict[str, list[LedgerEntity]] = defaultdict(list)
    for mention in mentions:
        dia = dia_of_memory.get(mention.memory_id)
        entity = by_id.get(mention.entity_id)
        if dia is None or entity is None or entity in out[dia]:
            continue
        out[dia].append(entity)
    return dict(out)


# -- scoring ---------------------------------------------------------------------------------------

def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def prf(tp: int, predicted: int, gold: int) -> dict[str, float | int | None]:
    """Precision (tp / predicted), recall (tp / gold) and F1 with their counts; a ratio with nothing
    to divide by is None."""
    precision, recall = _ratio(tp, predicted), _ratio(tp, gold)
    return {"precision": _round(precision), "recall": _round(recall), "f1": _round(_f1(precision, recall)),
            "matched": tp, "ledger": predicted, "labelled": gold}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def score_mentions(turns: Sequence[LabelledTurn],
                   ledger: Mapping[tuple[str, str], Sequence[LedgerEntity]]) -> dict[str, Any]:
    """Mention-level scores over the labelled turns; `ledger` maps (conversation, dia_id) to the
    ledger entities linked to that turn (a turn missing from it has none)."""
    tp = predicted = gold = agree = 0
    kind_tp, kind_gold, kind_pred, kind_pred_tp = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    missed_rows, false_rows = [], []
    for turn in turns:
        found = ledger.get((turn.conversation, turn.dia_id), ())
        matches, missed, false = match_turn(turn.entities, found)
        tp += len(matches)
        predicted += len(found)
        gold += len(turn.entities)
        for label, entity in matches:
            kind_tp[label.kind] += 1
            kind_pred_tp[entity.kind] += 1
            agree += label.kind == entity.kind
        kind_gold.update(e.kind for e in turn.entities)
        kind_pred.update(e.kind for e in found)
        missed_rows += [{"conversation": turn.conversation, "dia_id": turn.dia_id, "name": m.name, "kind": m.kind}
                        for m in missed]
        false_rows += [{"conversation": turn.conversation, "dia_id": turn.dia_id, "name": f.name, "kind": f.kind}
                       for f in false]
    by_kind = {}
    for kind in sorted(set(kind_gold) | set(kind_pred)):
        precision, recall = _ratio(kind_pred_tp[kind], kind_pred[kind]), _ratio(kind_tp[kind], kind_gold[kind])
        by_kind[kind] = {"precision": _round(precision), "recall": _round(recall),
                         "f1": _round(_f1(precision, recall)), "labelled": kind_gold[kind],
                         "matched": kind_tp[kind], "ledger": kind_pred[kind]}
    return {**prf(tp, predicted, gold), "turns": len(turns),
            "kind_agreement": _round(agree / tp) if tp else None, "by_kind": by_kind,
            "missed": missed_rows, "false": false_rows}


def labelled_entities(turns: Iterable[LabelledTurn]) -> dict[tuple[str, str], set[str]]:
    """The distinct labelled entities, keyed (conversation, normalised canonical name), each with
    every normalised name the labels give it."""
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for turn in turns:
        for label in turn.entities:
            out[(turn.conversation, normalise(label.canonical))] |= _label_names(label)
    return dict(out)


def score_entities(turns: Sequence[LabelledTurn],
                   ledger: Mapping[str, Sequence[LedgerEntity]]) -> dict[str, Any]:
    """Entity-level scores: `ledger` maps each labelled conversation (user) to all its ledger
    entities."""
    gold = labelled_entities(turns)
    conversations = sorted({t.conversation for t in turns})
    found = [(conv, e) for conv in conversations for e in ledger.get(conv, ())]
    right = sum(1 for conv, e in found if any(k[0] == conv and names & e.names for k, names in gold.items()))
    covered = sum(1 for (conv, _), names in gold.items()
                  if any(names & e.names for e in ledger.get(conv, ())))
    precision, recall = _ratio(right, len(found)), _ratio(covered, len(gold))
    # the two sides' matched counts can differ (two ledger entities may match one labelled entity)
    return {"precision": _round(precision), "recall": _round(recall), "f1": _round(_f1(precision, recall)),
            "labelled": len(gold), "ledger": len(found), "matched": covered, "ledger_matching": right}


# -- the run (model and store) ---------------------------------------------------------------------

class LedgerReader(Protocol):
    """The store's ledger reads (issue 27's store API)."""

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> list[Entity]: ...

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> list[EntityMention]: ...


def _reader(store: object) -> LedgerReader:
    if not (hasattr(store, "entities") and hasattr(store, "mentions")):
        raise SystemExit("this store has no entity ledger (store.entities / store.mentions): "
                         "the ledger of issue 27 is not in this checkout yet")
    return cast(LedgerReader, store)


def _labelled_conversation(conv: Any, wanted: set[str]) -> Any:
    """The conversation cut to the labelled turns (sessions with none dropped)."""
    sessions = [dataclasses.replace(s, turns=[t for t in s.turns if t.dia_id in wanted]) for s in conv.sessions]
    return dataclasses.replace(conv, sessions=[s for s in sessions if s.turns], questions=[])


RECORD_ONLY = "record only: the settings name no model (no llm section), so nothing is consolidated"


def _record(memory: Any, conv: Any, consolidate: str, clock: list[float] | None = None) -> dict[str, Any]:
    """Records the conversation's turns as bench ingest does and consolidates them: after each
    session ("session": later sessions' names of known entities are then counted at record time,
    as in an application), once at the end ("end", as `bench qa`'s consolidated store), or never
    ("none": record only). The seconds spent recording are added to ``clock[0]``."""
    from memoryscope_plugins.bench.locomo import ingest

    parts = [conv] if consolidate != "session" else [dataclasses.replace(conv, sessions=[s]) for s in conv.sessions]
    counts, skipped = Counter[str](), [RECORD_ONLY] if consolidate == "none" else []
    for part in parts:
        started = time.perf_counter()
        counts["turns"] += ingest(memory, part, "turns")
        if clock is not None:
            clock[0] += time.perf_counter() - started
        if consolidate == "none":
            continue
        report = memory.consolidate(conv.id)
        counts.update(llm_calls=report.llm_calls, errors=len(report.errors), failed_messages=report.failed_messages)
        if report.skipped_reason and report.skipped_reason not in skipped:
            skipped.append(report.skipped_reason)
    return {**{k: counts[k] for k in ("turns", "llm_calls", "errors", "failed_messages")}, "skipped": skipped}


@contextlib.contextmanager
def _timed_name_step(spent: list[float]) -> Iterator[None]:
    """Each call of record's name step (`person.record_names.new_entities`) while inside, its
    milliseconds appended to `spent`."""
    from memoryscope_plugins.person import record_names

    real: Callable[..., Any] = record_names.new_entities

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append((time.perf_counter() - started) * 1000)

    record_names.new_entities = timed
    try:
        yield
    finally:
        record_names.new_entities = real


def costs(turns: int, record_s: float, name_step_ms: Sequence[float]) -> dict[str, float | int | None]:
    """What recording cost: milliseconds per recorded turn (embedding and store included), and per
    call of the name step (mean, p95), with the counts they rest on."""
    ranked = sorted(name_step_ms)
    return {"turns": turns, "record_ms_per_turn": _round(record_s * 1000 / turns) if turns else None,
            "name_step_calls": len(ranked),
            "name_step_ms_mean": _round(statistics.fmean(ranked)) if ranked else None,
            "name_step_ms_p95": _round(ranked[min(len(ranked) - 1, int(len(ranked) * 0.95))]) if ranked else None}


def _read_ledger(memory: Any, user_id: str) -> tuple[list[Entity], dict[str, list[LedgerEntity]]]:
    """The user's ledger entities, and those linked to each turn (by dia_id): bench ingest keeps
    the LoCoMo turn id in the turn memory's metadata["dia_id"]."""
    from memoryscope_plugins.bench.locomo import covered_turns

    reader = _reader(memory.store)
    turns = memory.list(user_id, types=["turn"], limit=10_000)
    dia_of = {m.id: d for m in turns for d in covered_turns(m.metadata)}
    entities = reader.entities(user_id)
    mentions = reader.mentions(user_id, memory_ids=list(dia_of)) if dia_of else []
    return entities, ledger_by_turn(entities, mentions, dia_of)


def profile_rows(values: Iterable[ProfileValue]) -> list[dict[str, Any]]:
    """The profile consolidation built for one conversation, current values and history alike,
    by key and then by when each became true (not scored: the labels hold no profile; read it)."""
    def key(value: ProfileValue) -> tuple[str, str, str]:
        return value.key, value.valid_from.isoformat() if value.valid_from else "", value.value

    return [{"key": v.key, "value": v.value, "current": v.current, "set_by": v.set_by,
             "valid_from": v.valid_from.isoformat() if v.valid_from else None,
             "valid_to": v.valid_to.isoformat() if v.valid_to else None, "sources": len(v.source_ids)}
            for v in sorted(values, key=key)]


def format_profiles(results: Sequence[Mapping[str, Any]]) -> str:
    """Each conversation's profile as lines ("zh-conv-2  hometown: 成都 (since 2024-09-08)"); a
    replaced value says until when."""
    lines = []
    for result in results:
        for conversation, rows in result.get("profiles", {}).items():
            if not rows:
                lines.append(f"{conversation}  (no profile values)")
            for row in rows:
                since = f"since {row['valid_from'][:10]}" if row["valid_from"] else "since ?"
                until = f", until {row['valid_to'][:10]}" if row["valid_to"] else ""
                lines.append(f"{conversation}  {row['key']}: {row['value']} ({since}{until}, {row['set_by']})")
    return "\n".join(lines)


def run_set(data: Path, labels: Labels, settings_path: Path | None, keep: Path | None,
            consolidate: str = "session") -> dict[str, Any]:
    """Records and consolidates one labelled set in a fresh store, reads its ledger back and
    scores it; record only (``consolidate`` "none") when there are no settings or they name no
    model."""
    from memoryscope_plugins import MemoryScope, Settings
    from memoryscope_plugins.bench.locomo import load_conversations
    from memoryscope_plugins.settings import LLMSettings

    settings = Settings.load(settings_path) if settings_path is not None else Settings(llm=LLMSettings())
    if settings.llm.provider == "none":
        consolidate = "none"
    by_conv = {c.id: c for c in load_conversations(data, require_evidence=False)}
    wanted: dict[str, set[str]] = defaultdict(set)
    for turn in labels.turns:
        wanted[turn.conversation].add(turn.dia_id)
    missing = sorted(set(wanted) - set(by_conv))
    if missing:
        raise SystemExit(f"{data} has no conversation {missing}")
    with tempfile.TemporaryDirectory(prefix="memoryscope-bench-ledger-") as tmp:
        path = (keep if keep is not None else Path(tmp)) / f"ledger-{labels.language or 'set'}.db"
        if path.exists():
            raise SystemExit(f"{path} exists: the run needs a fresh store")
        path.parent.mkdir(parents=True, exist_ok=True)
        driven = settings.model_copy(update={
            "consolidation": settings.consolidation.model_copy(
                update={"enabled": True, "worker": "none", "flush_on_close": False}),
            "store": settings.store.model_copy(update={"backend": "sqlite", "path": path})})
        ledgers: dict[tuple[str, str], list[LedgerEntity]] = {}
        all_entities: dict[str, list[LedgerEntity]] = {}
        profiles: dict[str, list[dict[str, Any]]] = {}
        runs = {}
        clock, name_step_ms = [0.0], list[float]()
        with MemoryScope(driven) as memory, _timed_name_step(name_step_ms):
            memory.warm_up()  # the model's loading is not a record's cost
            for conv_id, dia_ids in wanted.items():
                runs[conv_id] = _record(memory, _labelled_conversation(by_conv[conv_id], dia_ids), consolidate,
                                        clock)
                entities, by_turn = _read_ledger(memory, conv_id)
                ledgers.update(((conv_id, dia), found) for dia, found in by_turn.items())
                all_entities[conv_id] = [LedgerEntity.of(e) for e in entities]
                profiles[conv_id] = profile_rows(memory.store.profile_values(conv_id))
    return {"language": labels.language, "data": str(data), "consolidate": consolidate, "consolidation": runs,
            "costs": costs(sum(run["turns"] for run in runs.values()), clock[0], name_step_ms),
            "profiles": profiles, "mentions": score_mentions(labels.turns, ledgers),
            "entities": score_entities(labels.turns, all_entities)}


def _cell(value: Any) -> str:
    return "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def format_table(results: Sequence[Mapping[str, Any]]) -> str:
    """The scores as a text table: one block per language, mentions overall and by kind, entities."""
    lines = [f"{'language / kind':<24}{'P':>8}{'R':>8}{'F1':>8}{'labelled':>10}{'ledger':>8}{'matched':>9}"]
    for result in results:
        mentions, entities = result["mentions"], result["entities"]
        lang = result["language"] or "?"
        rows = [(f"{lang} mentions", mentions)]
        rows += [(f"  {kind}", row) for kind, row in mentions["by_kind"].items()]
        rows.append((f"{lang} entities", entities))
        for label, row in rows:
            lines.append(f"{label:<24}{_cell(row['precision']):>8}{_cell(row['recall']):>8}"
                         f"{_cell(row.get('f1')):>8}{row['labelled']:>10}{row['ledger']:>8}{row['matched']:>9}")
        lines.append(f"  kind agreement {_cell(mentions['kind_agreement'])}, turns {mentions['turns']}, "
                     f"missed {len(mentions['missed'])}, false links {len(mentions['false'])}")
        cost = result.get("costs")
        if cost:
            lines.append(f"  record {_cell(cost['record_ms_per_turn'])} ms per turn; the name step "
                         f"{_cell(cost['name_step_ms_mean'])} ms per call (p95 {_cell(cost['name_step_ms_p95'])}, "
                         f"{cost['name_step_calls']} calls)")
        if result.get("consolidate") == "none":
            lines.append(f"  {RECORD_ONLY}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", dest="sets", nargs=2, action="append", required=True, metavar=("DATA", "LABELS"),
                        help="a LoCoMo-format data file and its labels file (repeat for each language)")
    parser.add_argument("--settings", type=Path, default=None,
                        help="a settings file whose llm section names the model that consolidates "
                             "(without one, or without an llm section: record only)")
    parser.add_argument("--limit-turns", type=int, default=None,
                        help="only the first N labelled turns of each conversation")
    parser.add_argument("--out", type=Path, default=None, help="write the full result (with the errors) as JSON")
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores in this folder (default: temporary)")
    parser.add_argument("--consolidate", choices=("session", "end"), default="session",
                        help="consolidate after each session (default; names of known entities are then "
                             "counted at record time) or once after all turns (as bench qa's consolidated store)")
    args = parser.parse_args(argv)
    results = []
    for data, labels_path in args.sets:
        labels = parse_labels(json.loads(Path(labels_path).read_text(encoding="utf-8")))
        results.append(run_set(Path(data), limit_turns(labels, args.limit_turns), args.settings, args.keep,
                               args.consolidate))
    print(format_table(results))
    print(format_profiles(results))
    if args.out is not None:
        args.out.write_text(json.dumps({"results": results}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
