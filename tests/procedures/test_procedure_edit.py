"""An operator edits and deletes an agent's procedures (Python API): the edit is checked as learning
checks the model's text, keeps the procedure's provenance, re-embeds it, and waits for no learning step
(it is refused while one holds the scope's lease, as the delete is)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from memoryscope_plugins import MemoryStatus
from memoryscope_plugins.errors import NotFoundError, ValidationError
from memoryscope_plugins.procedures.scope import procedure_scope
from tests.procedures.test_procedures import AGENT, GOOD, answer, booking_run, make, procedures_of

NEW_DO = "call book_table with day as an ISO date; for more than eight guests ask the user to phone instead"


def learnt(tmp_path, server, teacher, local_embedder, user: str = "anna"):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    engine.record(user, booking_run(user), agent_id=AGENT, run_outcome="succeeded")
    engine.consolidate()
    [procedure] = procedures_of(engine, user)
    return engine, procedure


def test_an_edit_rewrites_the_text_keeps_the_provenance_and_is_found_by_its_new_words(tmp_path, server, teacher,
                                                                                      local_embedder):
    engine, before = learnt(tmp_path, server, teacher, local_embedder)
    scope = procedure_scope("anna", AGENT)
    try:
        old_vector = engine.store.vectors_of(scope, [before.id])[before.id]
        edited = engine.update_procedure(AGENT, before.id, do=NEW_DO, why="")
        assert edited.content == f"When {GOOD['when']}: {NEW_DO}"
        [stored] = engine.procedures(AGENT)
        assert (stored.id, stored.content, stored.source_ids) == (before.id, edited.content, before.source_ids)
        for key in ("runs", "uses", "successes", "failures", "weight", "tools", "when"):
            assert stored.metadata[key] == before.metadata[key]
        assert stored.metadata["do"] == NEW_DO and stored.metadata["why"] == "" and "edited_at" in stored.metadata
        new_vector = engine.store.vectors_of(scope, [before.id])[before.id]
        assert not np.allclose(old_vector, new_vector)  # re-embedded: the old text's vector does not stay
        found = engine.retrieve("bob", "a party of twelve guests wants a table", agent_id=AGENT)
        assert "phone instead" in found.context.split("What worked before:", 1)[1]
        twin = asyncio.run(engine.aupdate_procedure(AGENT, before.id, why="the tool refuses weekday names"))
        assert twin.content.endswith("(why: the tool refuses weekday names)")
    finally:
        engine.close()


@pytest.mark.parametrize(("change", "reason"), [
    ({"tools": ["book_table", "reserve_seat"]}, "names a tool"),
    ({"do": "call reserve_seat before book_table"}, "names a tool or argument"),
    ({"do": "call book_table, as P1 says"}, "prompt markup"),
    ({"why": "the tool said 'No table free tonight'"}, "quotes a text"),
    ({"do": "call book_table, or mail desk@rosas.example"}, "personal data"),
    ({"do": "call book_table, or ring +44 20 7946 0958"}, "personal data"),
    ({"do": "x" * 401}, "400"),
    ({"when": "   "}, "when must not be empty"),
    ({"tools": []}, "tools"),
    ({"tools": "book_table"}, "tools"),
    ({"do": 3}, "do"),
    ({}, "nothing to change"),
])
def test_an_edit_that_says_what_the_procedure_does_not_hold_is_refused_and_nothing_changes(
        tmp_path, server, teacher, local_embedder, change, reason):
    engine, before = learnt(tmp_path, server, teacher, local_embedder)
    try:
        with pytest.raises(ValidationError, match=reason):
            engine.update_procedure(AGENT, before.id, **change)
        [after] = engine.procedures(AGENT)
        assert (after.content, after.metadata) == (before.content, before.metadata)
    finally:
        engine.close()


def test_a_quote_and_a_code_word_the_procedure_holds_may_stay(tmp_path, server, teacher, local_embedder):
    engine, before = learnt(tmp_path, server, teacher, local_embedder)
    try:
        edited = engine.update_procedure(AGENT, before.id, why="book_table said 'Invalid date' for a weekday name")
        assert edited.metadata["why"].startswith("book_table said")
    finally:
        engine.close()


def test_another_teams_procedure_an_expired_one_and_a_held_scope_are_not_edited(tmp_path, server, teacher,
                                                                                 local_embedder):
    engine, before = learnt(tmp_path, server, teacher, local_embedder, user="acme:anna")
    scope = procedure_scope("acme:anna", AGENT)
    try:
        with pytest.raises(NotFoundError):
            engine.update_procedure(AGENT, before.id, do=NEW_DO)  # team "" has no such procedure
        with pytest.raises(NotFoundError):
            engine.update_procedure(AGENT, before.id, team="globex", do=NEW_DO)
        assert engine.store.acquire_lease(scope, "a-learning-worker", 60.0)  # a learning step holds the scope
        with pytest.raises(ValidationError, match="being learnt"):
            engine.update_procedure(AGENT, before.id, team="acme", do=NEW_DO)
        with pytest.raises(ValidationError, match="being learnt"):
            engine.delete_procedure(AGENT, before.id, team="acme")
        engine.store.release_lease(scope, "a-learning-worker")
        assert engine.procedures(AGENT, team="acme")[0].content == before.content
        expired = engine.procedures(AGENT, team="acme")[0]
        expired.status = MemoryStatus.EXPIRED  # as a later run's procedure replacing it leaves it
        engine.store.put([expired], None)
        with pytest.raises(ValidationError, match="expired"):
            engine.update_procedure(AGENT, before.id, team="acme", do=NEW_DO)
        asyncio.run(engine.adelete_procedure(AGENT, before.id, team="acme"))
        assert engine.procedures(AGENT, team="acme", include_expired=True) == []
        with pytest.raises(NotFoundError):
            asyncio.run(engine.adelete_procedure(AGENT, before.id, team="acme"))
    finally:
        engine.close()
