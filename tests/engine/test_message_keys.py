"""A message's key: recorded once per user, by whichever writer comes first, never lost."""

from __future__ import annotations

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import StoreError, ValidationError
from memoryscope_plugins.message_keys import MAX_KEY_CHARS, keyed_id
from memoryscope_plugins.types import Message, ToolCall


def turns(engine, user_id: str = "anna") -> list[tuple[str, str]]:
    return [(m.id, m.content) for m in engine.list(user_id, types=["turn"], newest_first=False)]


def logged(engine, user_id: str = "anna") -> list[str]:
    return [m.id for m in engine.store.recent_messages(user_id, None, None, 100)]


def test_a_key_recorded_again_records_nothing_and_returns_the_same_id(engine):
    first = engine.record("anna", [{"role": "user", "content": "I moved to Lyon.", "key": "m-1"},
                                   {"role": "assistant", "content": "How exciting!", "key": "m-2"}])
    again = engine.record("anna", [{"role": "user", "content": "I moved to Lyon.", "key": "m-1"},
                                   {"role": "assistant", "content": "How exciting!", "key": "m-2"}])
    assert again == first == [keyed_id("anna", "m-1"), keyed_id("anna", "m-2")]
    assert turns(engine) == [(first[0], "I moved to Lyon."), (first[1], "How exciting!")]
    assert logged(engine) == first
    assert engine.store.logged_message_ids("anna", first) == set(first)


def test_only_the_new_messages_of_a_call_are_recorded_and_linked_to_the_turn_before(engine):
    (said,) = engine.record("anna", [Message(role="user", content="I adopted a cat.", key="m-1")])
    ids = engine.record("anna", [Message(role="user", content="I adopted a cat.", key="m-1"),
                                 Message(role="assistant", content="What is its name?", key="m-2"),
                                 Message(role="user", content="Miso.")])
    assert ids[0] == said and len(set(ids)) == 3
    assert [content for _, content in turns(engine)] == ["I adopted a cat.", "What is its name?", "Miso."]
    question = engine.get("anna", ids[1])
    assert question.previous_id == said


def test_a_deleted_turn_stays_deleted_when_its_key_comes_again(engine, tmp_path, local_embedder):
    """A retry that arrives after the user deleted the turn (another process, an HTTP client)
    records nothing: the deleted words never come back, by consolidation or by the key."""
    (pin,) = engine.record("anna", [{"role": "user", "content": "My PIN is 4921.", "key": "m-1"}])
    engine.delete("anna", pin)
    again = MemoryScope(engine.settings, embedder=local_embedder)  # a second writer over the same file
    try:
        assert again.record("anna", [{"role": "user", "content": "My PIN is 4921.", "key": "m-1"}]) == [pin]
    finally:
        again.close()
    assert engine.record("anna", [{"role": "user", "content": "My PIN is 4921.", "key": "m-1"}]) == [pin]
    assert turns(engine) == [] and engine.store.pending_messages("anna") == []
    assert [m.message.content for m in engine.store.recent_messages("anna", None, None, 10)] == [""]


def test_a_key_twice_in_one_call_is_one_message(engine):
    ids = engine.record("anna", [{"role": "user", "content": "Hello.", "key": "k"},
                                 {"role": "user", "content": "Hello.", "key": "k"}])
    assert ids[0] == ids[1]
    assert turns(engine) == [(ids[0], "Hello.")]


def test_keys_are_each_users_own(engine):
    (anna,) = engine.record("anna", [{"role": "user", "content": "I like tea.", "key": "shared-id"}])
    (ben,) = engine.record("ben", [{"role": "user", "content": "I like tea.", "key": "shared-id"}])
    assert anna != ben
    assert [c for _, c in turns(engine, "anna")] == [c for _, c in turns(engine, "ben")] == ["I like tea."]


def test_a_keyed_tool_call_is_logged_and_counted_once(engine):
    call = {"role": "tool", "tool_call": ToolCall(name="search", arguments={"q": "Lyon"}, result="3 hits"),
            "key": "call-1"}
    first = engine.record("anna", [call], agent_id="planner")
    assert engine.record("anna", [call], agent_id="planner") == first
    (stats,) = engine.tool_stats("planner")
    assert stats.calls == 1


def test_the_key_another_writer_logged_meanwhile_is_left_out_and_the_rest_recorded(tmp_path, local_embedder,
                                                                                   monkeypatch):
    """Two engines over one file (two processes of a team): the other one logs the same message
    after this one looked its keys up and before it writes. The store refuses this write as a
    whole; it is made again without the message the other one logged."""
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as one, \
            MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as other:
        asked = {"role": "user", "content": "Book the flight.", "key": "m-1", "timestamp": "2026-03-02T10:00:00+00:00"}
        writes = []
        real = one.store.append_messages

        def after_the_other(user_id, agent_id, messages, *args, **kwargs):
            writes.append([m.content for m in messages])
            if len(writes) == 1:
                other.record("anna", [asked])
            return real(user_id, agent_id, messages, *args, **kwargs)
        monkeypatch.setattr(one.store, "append_messages", after_the_other)
        ids = one.record("anna", [asked, {"role": "assistant", "content": "Booked.", "key": "m-2",
                                          "timestamp": "2026-03-02T10:01:00+00:00"}])
        assert ids == [keyed_id("anna", "m-1"), keyed_id("anna", "m-2")]
        assert writes == [["Book the flight.", "Booked."], ["Booked."]]
        assert turns(one) == [(ids[0], "Book the flight."), (ids[1], "Booked.")]
        assert one.get("anna", ids[1]).previous_id == ids[0]  # linked to the turn the other one wrote


def test_a_store_failure_that_is_not_a_duplicate_is_raised_and_nothing_written(engine, monkeypatch):
    def refuse(*args, **kwargs):
        raise StoreError("disk full")
    monkeypatch.setattr(engine.store, "append_messages", refuse)
    with pytest.raises(StoreError, match="disk full"):
        engine.record("anna", [{"role": "user", "content": "Remember this.", "key": "m-1"}])
    monkeypatch.undo()
    assert turns(engine) == []
    assert engine.record("anna", [{"role": "user", "content": "Remember this.", "key": "m-1"}]) == [
        keyed_id("anna", "m-1")]
    assert [c for _, c in turns(engine)] == ["Remember this."]


@pytest.mark.parametrize("key, error", [(42, "must be a string"), ("  ", "must not be blank"),
                                        ("k" * (MAX_KEY_CHARS + 1), "longer than")])
def test_a_bad_key_is_refused_before_anything_is_written(engine, key, error):
    with pytest.raises(ValidationError, match=error):
        engine.record("anna", [{"role": "user", "content": "Hello.", "key": key}])
    assert turns(engine) == []


RUN = [{"role": "user", "content": "Book a table at Rosa's.", "key": "m-1"},
       {"role": "tool", "tool_call": {"name": "book", "arguments": {"table": 4}, "result": "booked"}, "key": "m-2"},
       {"role": "assistant", "content": "Booked.", "key": "m-3"}]


def _queued_runs(engine) -> int:
    from memoryscope_plugins.procedures.scope import procedure_scope
    return len(engine.store.pending_messages(procedure_scope("anna", "concierge")))


def test_a_retried_call_that_ends_a_run_queues_the_run_once(tmp_path, local_embedder):
    from tests.support.run_outcomes import procedures_engine

    with procedures_engine(tmp_path / "m.db", local_embedder) as engine:
        first = engine.record("anna", RUN, agent_id="concierge", run_outcome="succeeded")
        assert engine.record("anna", RUN, agent_id="concierge", run_outcome="succeeded") == first
        assert _queued_runs(engine) == 1  # one run marker: the retry queued nothing more
        (stats,) = engine.tool_stats("concierge")
        assert stats.calls == 1


def test_a_message_after_one_recorded_already_follows_it(engine):
    """The second of three messages was recorded by another agent: the third follows it, not the first."""
    (known,) = engine.record("anna", [{"role": "user", "content": "Which train?", "key": "b",
                                       "timestamp": "2026-03-02T10:01:00+00:00"}])
    ids = engine.record("anna", [
        {"role": "assistant", "content": "I can book a train.", "key": "a", "timestamp": "2026-03-02T10:00:00+00:00"},
        {"role": "user", "content": "Which train?", "key": "b", "timestamp": "2026-03-02T10:01:00+00:00"},
        {"role": "assistant", "content": "The 9:12 to Lyon.", "key": "c", "timestamp": "2026-03-02T10:02:00+00:00"}])
    assert ids[1] == known
    answer = engine.get("anna", ids[2])
    assert answer.previous_id == known and answer.context == "anna: Which train?"


def test_a_key_repeated_with_other_words_in_one_call_is_refused(engine):
    with pytest.raises(ValidationError, match="message 1 has the key of message 0"):
        engine.record("anna", [{"role": "user", "content": "Hello.", "key": "k"},
                               {"role": "user", "content": "Goodbye.", "key": "k"}])
    assert turns(engine) == []


def test_the_same_run_ended_by_two_writers_at_once_is_queued_once(tmp_path, local_embedder, monkeypatch):
    from tests.support.run_outcomes import procedures_engine

    with procedures_engine(tmp_path / "m.db", local_embedder) as one, \
            procedures_engine(tmp_path / "m.db", local_embedder) as other:
        real = one.store.append_messages
        calls = []

        def after_the_other(user_id, agent_id, messages, *args, **kwargs):
            calls.append(user_id)
            if len(calls) == 1:  # the other writer's whole call, run end included, lands first
                other.record("anna", RUN, agent_id="concierge", run_outcome="succeeded")
            return real(user_id, agent_id, messages, *args, **kwargs)
        monkeypatch.setattr(one.store, "append_messages", after_the_other)
        one.record("anna", RUN, agent_id="concierge", run_outcome="succeeded")
        assert _queued_runs(one) == 1
        assert [c for _, c in turns(one)] == ["Book a table at Rosa's.", "Booked."]


def test_a_retry_queues_the_run_whose_end_failed_the_first_time(tmp_path, local_embedder, monkeypatch):
    from memoryscope_plugins.procedures.scope import procedure_scope
    from tests.support.run_outcomes import procedures_engine

    with procedures_engine(tmp_path / "m.db", local_embedder) as engine:
        real = engine.store.append_messages
        failures = []

        def run_end_fails_once(user_id, *args, **kwargs):
            if user_id == procedure_scope("anna", "concierge") and not failures:
                failures.append(user_id)
                raise StoreError("database is locked")
            return real(user_id, *args, **kwargs)
        monkeypatch.setattr(engine.store, "append_messages", run_end_fails_once)
        with pytest.raises(StoreError):
            engine.record("anna", RUN, agent_id="concierge", run_outcome="succeeded")
        assert _queued_runs(engine) == 0  # the messages are written, the run's end is not
        first = engine.record("anna", RUN, agent_id="concierge", run_outcome="succeeded")
        assert _queued_runs(engine) == 1
        assert engine.record("anna", RUN, agent_id="concierge", run_outcome="succeeded") == first
        assert _queued_runs(engine) == 1
