"""A small recorded conversation for the retrieval tests that follow names across turns (the
second hop, the ledger): the times it is said and asked, filler turns that name nobody, the
turns of a two-hop question (who moved to Boston; what that person does) and the question, and
`record_sessions`, which records sessions of (speaker, text) turns ten days apart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

SAID = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
NOW = datetime(2023, 10, 23, 9, 0, tzinfo=timezone.utc)
FILLER = [
    "I baked sourdough bread this morning and it came out great.",
    "My garden tomatoes are finally turning red.",
    "We watched a documentary about deep sea creatures.",
    "I have been learning to play the ukulele on weekends.",
    "The weather was rainy all week, so I stayed in and read.",
    "I signed up for a pottery class at the community centre.",
]
BOSTON = "My friend Anna moved to Boston last spring."
NURSE = "Anna works night shifts as a nurse at the children's hospital."
QUESTION = "What does the person who moved to Boston do for a living?"


def record_sessions(engine, user: str, sessions: list[list[tuple[str, str]]], *, the_user: str = "Caroline") -> None:
    """Record each session (its turns a minute apart, sessions ten days apart from `SAID`); the
    speaker `the_user` is the user role, every other speaker the assistant's."""
    for number, turns in enumerate(sessions):
        start = SAID + timedelta(days=10 * number)
        engine.record(user, [{"role": "user" if who == the_user else "assistant", "name": who, "content": text,
                              "timestamp": start + timedelta(minutes=i)} for i, (who, text) in enumerate(turns)],
                      session_id=f"s{number}")
