"""The adapters' scenario for what people say (issue 41): the human's turn is a statement, and what
it should bring back was said in an earlier session in other words.

`record_earlier_session` records a week-old session of one user: `REMEMBERED` (a memory about work
and stress) among unrelated ones (a pet, paint, food, a nephew, a trip, small talk), each with the
assistant's reply. Later the human says `STATEMENT`, which shares no word with `REMEMBERED`; two
of the unrelated turns share one word each with it ("completely", "handed"), so a ranking that
trusts shared words fills a block of `TOP_K` with them and their replies, and one that reads a
statement by its meaning puts `REMEMBERED` and its reply first. `UNRELATED` is about nothing the user said.

Measured with the local embedder (`engine.retrieve("anna", text, top_k=50, min_relevance=-1)`, the
cosine in `scores["cosine"]`): for `STATEMENT`, `REMEMBERED`'s reply ranks first and `REMEMBERED`
second (cosine 0.358, 0.27 calibrated to the query's noise floor of 0.125; final score 0.97), the
third other memory at cosine 0.147 (final 0.35). With the ranking before statements leaned on the
vectors (b1a9ec1) the four memories sharing a word came first (final 1.73 to 1.98, `REMEMBERED`
1.23). For `UNRELATED`, `REMEMBERED` and its reply rank 13th and 12th of 14 (cosine 0.17, against
0.33 for the third).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from memoryscope_plugins import MemoryScope

REMEMBERED = "Setting boundaries with my boss about extra work has really lowered my stress."
STATEMENT = "My manager handed me two more assignments and I'm completely swamped."
UNRELATED = "The weather is lovely today, I might water the plants."
TOP_K = 3  # the block's memories: fewer than the memories sharing a word with STATEMENT
EARLIER = [
    (REMEMBERED, "That is a healthy change."),
    ("My cat Mochi knocked a glass off the kitchen table again.", "Cats will be cats!"),
    ("We completely repainted the living room a pale green.", "Green is calming."),
    ("I can't stand coriander, it tastes like soap to me.", "Noted, no coriander."),
    ("My nephew handed in a volcano model at the science fair.", "Did it erupt?"),
    ("We're flying to Lisbon for a week in October.", "What a trip that will be."),
    ("Nice chatting with you, have a good evening!", "You too!"),
]


def record_earlier_session(engine: MemoryScope, user_id: str = "anna") -> None:
    """Record `EARLIER` as one session of `user_id` a week ago, a turn a minute apart."""
    said = datetime.now(timezone.utc) - timedelta(days=7)
    turns: list[dict[str, Any]] = []
    for user_turn, reply in EARLIER:
        for role, text in (("user", user_turn), ("assistant", reply)):
            turns.append({"role": role, "content": text, "timestamp": said + timedelta(minutes=len(turns))})
    engine.record(user_id, turns, session_id="a week ago")
