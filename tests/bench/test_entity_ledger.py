"""bench/entity_ledger.py's scoring (pure: no model, no store) and the labelled entity sets of
bench/data (their shape and the labelling rules that can be checked without the data)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from memoryscope_plugins.types import Entity, EntityKind, EntityMention, ProfileValue
from tests.support.bench_scripts import load_bench_script
from tests.support.paths import ROOT

LABELS = {"en": ROOT / "bench" / "data" / "entities_en.json", "zh": ROOT / "bench" / "data" / "entities_zh.json"}
T0 = datetime(2023, 5, 8, tzinfo=timezone.utc)




el = load_bench_script("entity_ledger.py", "entity_ledger_bench")


def entity(id_: str, name: str, kind: EntityKind = EntityKind.PERSON, aliases: tuple[str, ...] = ()) -> Entity:
    return Entity(id=id_, user_id="conv-26", name=name, kind=kind, aliases=list(aliases))


def mention(entity_id: str, memory_id: str, counted: bool = True) -> EntityMention:
    return EntityMention(entity_id=entity_id, memory_id=memory_id, user_id="conv-26", said_at=T0, counted=counted)


def label(name: str, kind: str = "person", canonical: str | None = None) -> object:
    return el.LabelledEntity(name, kind, canonical or name)


def turn(dia: str, *labels: object, conversation: str = "conv-26") -> object:
    return el.LabelledTurn(conversation, dia, "Caroline", tuple(labels))


MELANIE = entity("e1", "Melanie", aliases=("Mel",))
CAROLINE = entity("e2", "Caroline")
SWEDEN = entity("e3", "Sweden", EntityKind.PLACE)
PAINTING = entity("e4", "painting", EntityKind.TOPIC)
LUNA = entity("e5", "Luna", EntityKind.PERSON)  # a pet the ledger took for a person


# -- normalising and matching ----------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    ("Mel's", "mel"), ("Mel\u2019s", "mel"), ("LGBTQ+", "lgbtq"), ("  Amy  Ellis-Nutt ", "amy ellis nutt"),
    ("\uff2c\uff27\uff22\uff34\uff31", "lgbtq"), ("Charlotte's Web", "charlotte s web"), ("林晓雯", "林晓雯"),
    ("mini 12", "mini 12"), ("西溪湿地。", "西溪湿地"), ("", ""), ("the Minnesota Wolves", "minnesota wolves"),
    ("The Name of the Wind", "name of the wind"), ("Theo", "theo"),
])
def test_normalise(raw: str, expected: str) -> None:
    assert el.normalise(raw) == expected


def test_a_label_matches_a_ledger_entity_by_alias_or_canonical_name() -> None:
    mel, melanie = el.LedgerEntity.of(MELANIE), el.LedgerEntity.of(CAROLINE)
    matches, missed, false = el.match_turn([label("Mel", canonical="Melanie")], [melanie, mel])
    assert matches == [(label("Mel", canonical="Melanie"), mel)] and missed == [] and false == [melanie]
    # a misspelling the ledger does not know still matches through the label's canonical name
    matches, missed, false = el.match_turn([label("Mell", canonical="Melanie")], [mel])
    assert len(matches) == 1 and not missed and not false


def test_each_ledger_entity_matches_one_label_at_most() -> None:
    mel = el.LedgerEntity.of(MELANIE)
    labels = [label("Mel", canonical="Melanie"), label("Melanie")]
    matches, missed, false = el.match_turn(labels, [mel])
    assert [m[0].name for m in matches] == ["Mel"] and [m.name for m in missed] == ["Melanie"] and false == []


def test_the_written_name_is_preferred_over_the_canonical_one() -> None:
    # two ledger entities: one answering to the canonical name only, one to the written name
    canonical_only = el.LedgerEntity.of(entity("a", "Melanie"))
    written = el.LedgerEntity.of(entity("b", "Mel"))
    matches, _, false = el.match_turn([label("Mel", canonical="Melanie")], [canonical_only, written])
    assert matches[0][1] == written and false == [canonical_only]


def test_ledger_by_turn_keeps_turn_memories_and_counts_an_entity_once() -> None:
    mentions = [mention("e1", "m1"), mention("e1", "m1"), mention("e2", "m1"), mention("e3", "obs", counted=False),
                mention("gone", "m2"), mention("e3", "m2")]
    by_turn = el.ledger_by_turn([MELANIE, CAROLINE, SWEDEN], mentions, {"m1": "D1:1", "m2": "D1:2"})
    assert [e.name for e in by_turn["D1:1"]] == ["Melanie", "Caroline"]
    assert [e.name for e in by_turn["D1:2"]] == ["Sweden"]  # the observation's link and the unknown entity are not
    assert set(by_turn) == {"D1:1", "D1:2"}


# -- scores ----------------------------------------------------------------------------------------

def _ledger(**turns: list[Entity]) -> dict[tuple[str, str], list[object]]:
    return {("conv-26", dia.replace("_", ":")): [el.LedgerEntity.of(e) for e in ents] for dia, ents in turns.items()}


def test_mention_scores_precision_recall_and_kinds() -> None:
    turns = [
        turn("D1:1", label("Mel", canonical="Melanie")),                     # found
        turn("D1:2", label("Caroline"), label("Sweden", "place")),           # Caroline found, Sweden missed
        turn("D1:3"),                                                        # nothing named: a false link
        turn("D1:4", label("Luna", "pet")),                                  # found, the wrong kind
    ]
    ledger = _ledger(D1_1=[MELANIE], D1_2=[CAROLINE], D1_3=[PAINTING], D1_4=[LUNA])
    scores = el.score_mentions(turns, ledger)
    assert (scores["matched"], scores["ledger"], scores["labelled"]) == (3, 4, 4)
    assert scores["precision"] == 0.75 and scores["recall"] == 0.75 and scores["f1"] == 0.75
    assert scores["kind_agreement"] == round(2 / 3, 4)
    kinds = scores["by_kind"]
    assert kinds["place"] == {"precision": None, "recall": 0.0, "f1": None, "labelled": 1, "matched": 0, "ledger": 0}
    assert kinds["topic"]["precision"] == 0.0 and kinds["topic"]["recall"] is None
    assert kinds["pet"]["recall"] == 1.0 and kinds["pet"]["precision"] is None
    # Luna found as a person: the person precision counts it as right (the match), the kind is scored apart
    assert kinds["person"]["precision"] == 1.0 and kinds["person"]["ledger"] == 3
    assert scores["missed"] == [{"conversation": "conv-26", "dia_id": "D1:2", "name": "Sweden", "kind": "place"}]
    assert scores["false"] == [{"conversation": "conv-26", "dia_id": "D1:3", "name": "painting", "kind": "topic"}]


def test_mention_scores_with_an_empty_ledger_and_no_labels() -> None:
    empty = el.score_mentions([turn("D1:1", label("Caroline"))], {})
    assert empty["precision"] is None and empty["recall"] == 0.0 and empty["f1"] is None
    nothing = el.score_mentions([turn("D1:1")], _ledger(D1_1=[CAROLINE]))
    assert nothing["precision"] == 0.0 and nothing["recall"] is None


def test_entity_scores_are_per_conversation() -> None:
    turns = [turn("D1:1", label("Mel", canonical="Melanie")), turn("D1:2", label("Melanie"), label("Sweden", "place")),
             turn("D1:1", label("John"), conversation="conv-41")]
    gold = el.labelled_entities(turns)
    assert gold == {("conv-26", "melanie"): {"mel", "melanie"}, ("conv-26", "sweden"): {"sweden"},
                    ("conv-41", "john"): {"john"}}
    ledger = {"conv-26": [el.LedgerEntity.of(e) for e in (MELANIE, PAINTING, entity("x", "John"))],
              "conv-41": [el.LedgerEntity.of(entity("y", "John"))], "conv-99": [el.LedgerEntity.of(CAROLINE)]}
    scores = el.score_entities(turns, ledger)
    # conv-26's "John" is not a labelled entity of conv-26; conv-99 is not labelled at all
    assert (scores["ledger"], scores["ledger_matching"], scores["labelled"], scores["matched"]) == (4, 2, 3, 2)
    assert scores["precision"] == 0.5 and scores["recall"] == round(2 / 3, 4)
    assert scores["f1"] == round(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3), 4)


def test_format_table_shows_each_language_and_kind() -> None:
    turns = [turn("D1:1", label("Mel", canonical="Melanie"))]
    result = {"language": "en", "mentions": el.score_mentions(turns, _ledger(D1_1=[MELANIE, PAINTING])),
              "entities": el.score_entities(turns, {"conv-26": [el.LedgerEntity.of(MELANIE)]})}
    table = el.format_table([result])
    assert re.search(r"en mentions\s+0\.500\s+1\.000\s+0\.667\s+1\s+2\s+1", table)
    assert re.search(r"  topic\s+0\.000\s+-", table) and "en entities" in table


# -- labels files ----------------------------------------------------------------------------------

def test_parse_labels_rejects_bad_entries() -> None:
    row = {"conversation": "c", "dia_id": "D1:1", "speaker": "A",
           "entities": [{"name": "Mel", "kind": "person", "canonical": "Melanie"}, {"name": "Sweden", "kind": "place"}]}
    labels = el.parse_labels({"language": "en", "turns": [row]})
    assert labels.turns[0].entities == (el.LabelledEntity("Mel", "person", "Melanie"),
                                        el.LabelledEntity("Sweden", "place", "Sweden"))
    with pytest.raises(ValueError, match="twice"):
        el.parse_labels({"turns": [row, row]})
    for bad in ({"name": "X", "kind": "animal"}, {"name": " ", "kind": "person"}, {"kind": "person"}):
        with pytest.raises(ValueError, match="bad entity"):
            el.parse_labels({"turns": [{"conversation": "c", "dia_id": "D1:1", "entities": [bad]}]})


def test_limit_turns_keeps_the_first_turns_of_each_conversation() -> None:
    labels = el.Labels("en", (turn("D1:1"), turn("D1:2"), turn("D1:1", conversation="b"), turn("D1:3")))
    assert [(t.conversation, t.dia_id) for t in el.limit_turns(labels, 2).turns] == [
        ("conv-26", "D1:1"), ("conv-26", "D1:2"), ("b", "D1:1")]
    assert el.limit_turns(labels, None) is labels


def _dia(dia_id: str) -> tuple[int, int]:
    match = re.fullmatch(r"D(\d+):(\d+)", dia_id)
    assert match, dia_id
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize(("language", "least"), [("en", 300), ("zh", 100)])
def test_labels_files_are_contiguous_from_the_start_and_follow_the_rules(language: str, least: int) -> None:
    doc = json.loads(LABELS[language].read_text(encoding="utf-8"))
    labels = el.parse_labels(doc)
    assert labels.language == language and len(labels.turns) >= least and doc["rules"]
    assert set(doc["source"]["conversations"]) == {t.conversation for t in labels.turns}
    for conversation, count in doc["source"]["conversations"].items():
        dias = [_dia(t.dia_id) for t in labels.turns if t.conversation == conversation]
        assert len(dias) == count and dias[0] == (1, 1)
        for (s1, n1), (s2, n2) in zip(dias, dias[1:]):  # session order, every turn, no gap
            assert (s2, n2) in ((s1, n1 + 1), (s1 + 1, 1)), (conversation, s1, n1, s2, n2)
    for t in labels.turns:
        canonical = [el.normalise(e.canonical) for e in t.entities]
        assert len(canonical) == len(set(canonical)), t  # one entry per entity per turn
    assert all(set(raw) == {"conversation", "dia_id", "speaker", "entities"} for raw in doc["turns"])  # no texts
    names = {e.name for t in labels.turns for e in t.entities}
    assert not names & {"Friday", "Saturday", "painting", "pottery", "my kids", "外婆", "我爸"}


def test_the_bench_folder_is_not_shipped() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[tool.setuptools]", 1)[1].split("\n[tool.setuptools.package-data]", 1)[0]
    quoted = re.findall(r'"([^"]+)"', section)
    assert "memoryscope_plugins.bench" in quoted  # the section read is the package list
    assert not [q for q in quoted if q == "bench" or q.startswith(("bench.", "bench/"))]
    assert not (ROOT / "MANIFEST.in").exists() and not (ROOT / "setup.py").exists()


# -- the run: recording and the turn -> memory mapping (no model: the ledger read is a stand-in) ----

class _NameLedger:
    """A stand-in for the store's ledger reads: links each known name to the turn memories whose
    text contains it, and records what it was asked."""

    def __init__(self, store: object, names: dict[str, tuple[str, EntityKind]]) -> None:
        self.store, self.names = store, names
        self.asked: list[tuple[str, list[str]]] = []

    def entities(self, user_id: str, *, ids=None, kind=None) -> list[Entity]:
        return [Entity(id=name, user_id=user_id, name=canonical, kind=k) for name, (canonical, k) in self.names.items()]

    def mentions(self, user_id: str, *, entity_ids=None, memory_ids=None) -> list[EntityMention]:
        self.asked.append((user_id, sorted(memory_ids or [])))
        memories = self.store.get(user_id, list(memory_ids or []))  # type: ignore[attr-defined]
        return [mention(name, m.id) for m in memories for name in self.names if name in m.content]


@pytest.mark.parametrize("consolidate", ["session", "end"])
def test_run_set_records_the_labelled_turns_and_scores_the_ledger_per_turn(tmp_path, monkeypatch, consolidate) -> None:
    data = [{"sample_id": "conv-x", "qa": [], "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "1:14 pm on 25 May, 2023",
        "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to Sweden."},
                      {"speaker": "Melanie", "dia_id": "D1:2", "text": "Cool! How was it?"}],
        "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "Mel, Oliver says hi.",
                       "blip_caption": "a photo of a cat"},
                      {"speaker": "Melanie", "dia_id": "D2:2", "text": "Not labelled: Sweden again."}]}}]
    (tmp_path / "data.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "settings.yaml").write_text("{}\n", encoding="utf-8")
    labels = el.Labels("en", (
        turn("D1:1", label("Mel", canonical="Melanie"), label("Sweden", "place"), conversation="conv-x"),
        turn("D1:2", conversation="conv-x"),
        turn("D2:1", label("Mel", canonical="Melanie"), label("Oliver", "pet"), conversation="conv-x")))
    readers: list[_NameLedger] = []

    def reader(store: object) -> _NameLedger:
        names = {"Mel": ("Melanie", EntityKind.PERSON), "Sweden": ("Sweden", EntityKind.PLACE),
                 "cat": ("cat", EntityKind.PET)}
        readers.append(_NameLedger(store, names))
        return readers[0]

    monkeypatch.setattr(el, "_reader", reader)
    result = el.run_set(tmp_path / "data.json", labels, tmp_path / "settings.yaml", tmp_path / "kept", consolidate)
    run = result["consolidation"]["conv-x"]
    assert run["turns"] == 3 and run["llm_calls"] == 0  # D2:2 is not labelled: not recorded
    # no model configured: record only, said, not hidden
    assert run["skipped"] == [el.RECORD_ONLY] and result["consolidate"] == "none"
    assert el.RECORD_ONLY in el.format_table([result])
    assert result["costs"]["turns"] == 3 and result["costs"]["name_step_calls"] == 3
    assert result["costs"]["record_ms_per_turn"] > 0
    assert [user for user, _ in readers[0].asked] == ["conv-x"] and len(readers[0].asked[0][1]) == 3
    mentions = result["mentions"]
    assert (mentions["matched"], mentions["ledger"], mentions["labelled"]) == (3, 4, 4)
    # the caption "[shares a photo of a cat]" is recorded with the turn: a false link, as in a real run
    assert mentions["false"] == [{"conversation": "conv-x", "dia_id": "D2:1", "name": "cat", "kind": "pet"}]
    assert [m["name"] for m in mentions["missed"]] == ["Oliver"]
    assert result["entities"]["labelled"] == 3 and result["entities"]["matched"] == 2
    assert (tmp_path / "kept" / "ledger-en.db").exists()
    assert result["profiles"] == {"conv-x": []}  # no model: no profile, and the run says so
    assert el.format_profiles([result]) == "conv-x  (no profile values)"
    with pytest.raises(SystemExit, match="fresh store"):  # a kept store is never measured twice
        el.run_set(tmp_path / "data.json", labels, tmp_path / "settings.yaml", tmp_path / "kept", consolidate)


def test_without_settings_the_run_is_record_only_and_the_ledger_is_records(tmp_path) -> None:
    data = [{"sample_id": "conv-y", "qa": [], "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to Sweden."},
                      {"speaker": "Melanie", "dia_id": "D1:2", "text": "Cool! How was Sweden?"}]}}]
    (tmp_path / "data.json").write_text(json.dumps(data), encoding="utf-8")
    labels = el.Labels("en", (turn("D1:1", label("Mel", canonical="Melanie"), label("Sweden", "place"),
                                   conversation="conv-y"),
                              turn("D1:2", label("Sweden", "place"), conversation="conv-y")))
    result = el.run_set(tmp_path / "data.json", labels, None, None)
    assert result["consolidate"] == "none" and result["consolidation"]["conv-y"]["llm_calls"] == 0
    mentions = result["mentions"]  # Melanie from the greeting before she speaks, Sweden read by record
    assert (mentions["matched"], mentions["ledger"], mentions["labelled"]) == (3, 3, 3)


def test_costs_are_per_turn_and_per_call() -> None:
    assert el.costs(4, 0.2, [1.0, 2.0, 3.0]) == {"turns": 4, "record_ms_per_turn": 50.0, "name_step_calls": 3,
                                                  "name_step_ms_mean": 2.0, "name_step_ms_p95": 3.0}
    assert el.costs(0, 0.0, [])["record_ms_per_turn"] is None


def test_the_profile_is_listed_by_key_with_its_history() -> None:
    from datetime import datetime, timezone

    def at(day: int) -> datetime:
        return datetime(2024, 9, day, 21, 40, tzinfo=timezone.utc)

    values = [ProfileValue(id="w2", user_id="c", key="work", value="初中教物理", valid_from=at(20), source_ids=["m9"]),
              ProfileValue(id="h", user_id="c", key="hometown", value="成都", valid_from=at(8), source_ids=["m3"]),
              ProfileValue(id="w1", user_id="c", key="work", value="小学教数学", valid_from=at(8), valid_to=at(20),
                           superseded_by="w2", source_ids=["m3"])]
    rows = el.profile_rows(values)
    assert [(r["key"], r["value"], r["current"]) for r in rows] == [
        ("hometown", "成都", True), ("work", "小学教数学", False), ("work", "初中教物理", True)]
    assert rows[1]["valid_to"] == at(20).isoformat() and rows[1]["sources"] == 1
    assert el.format_profiles([{"profiles": {"zh-conv-2": rows}}]).splitlines() == [
        "zh-conv-2  hometown: 成都 (since 2024-09-08, model)",
        "zh-conv-2  work: 小学教数学 (since 2024-09-08, until 2024-09-20, model)",
        "zh-conv-2  work: 初中教物理 (since 2024-09-20, model)"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_ledger_that_knows_what_the_labels_know_scores_one(language: str) -> None:
    labels = el.parse_labels(json.loads(LABELS[language].read_text(encoding="utf-8")))
    names: dict[tuple[str, str], set[str]] = {}
    for t in labels.turns:
        for e in t.entities:
            names.setdefault((t.conversation, e.canonical), set()).add(e.name)
    ids = {key: f"e{i}" for i, key in enumerate(sorted(names))}
    kinds = {(t.conversation, e.canonical): EntityKind(e.kind) for t in labels.turns for e in t.entities}
    ledger = {key: el.LedgerEntity.of(Entity(id=ids[key], user_id=key[0], name=key[1], kind=kinds[key],
                                             aliases=sorted(names[key] - {key[1]}))) for key in names}
    by_turn = {(t.conversation, t.dia_id): [ledger[(t.conversation, e.canonical)] for e in t.entities]
               for t in labels.turns}
    mentions = el.score_mentions(labels.turns, by_turn)
    assert mentions["precision"] == mentions["recall"] == mentions["kind_agreement"] == 1.0
    per_user: dict[str, list[object]] = {}
    for (conversation, _), entity_ in ledger.items():
        per_user.setdefault(conversation, []).append(entity_)
    entities = el.score_entities(labels.turns, per_user)
    assert entities["precision"] == entities["recall"] == 1.0 and entities["labelled"] == len(names)
