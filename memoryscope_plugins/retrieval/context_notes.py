"""What the context block may say before its memory lines (Memary's "new context window"): the
user's profile as it is now, and the entities that matter to the question.

    About the user now: home: Leeds (since 2026-07); likes: tea, hiking
    Named here: Anna (person; 12 mentions, last 2023-05-08); Boston (place; 3 mentions, last 2023-05-01)

Each is behind a setting (``retrieval.context_profile``, ``retrieval.context_entities``); without a
profile or a ledger the block is as it was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Sequence

from ..person.ledger import rank
from ..person.profile import profile_lines
from ..types import Entity, Memory, ProfileValue, as_aware
from .ledger_cache import UserLedger

PROFILE_LABEL = {"en": "About the user now: ", "zh": "用户现在的情况："}
ENTITIES_LABEL = {"en": "Named here: ", "zh": "涉及的人和事："}


def profile_note(values: Iterable[ProfileValue], language: str) -> str | None:
    """One line with the current profile, or None when it is empty."""
    lang = "zh" if language.lower().startswith("zh") else "en"
    lines = profile_lines(values, lang)
    if not lines:
        return None
    return PROFILE_LABEL[lang] + ("；" if lang == "zh" else "; ").join(lines)


def entities_that_matter(ledger: UserLedger, query: str, memories: Iterable[Memory], now: datetime,
                         limit: int, asked: str | None = None) -> list[Entity]:
    """Up to `limit` entities: the one the question asks about, then those the question and the
    memories name, most relevant first (`person.ledger.rank`)."""
    if limit <= 0 or not ledger:
        return []
    named = ledger.matcher.entities_in(query)
    for memory in memories:
        named |= ledger.matcher.entities_in(memory.content)
    ranked = rank([ledger.entities[eid] for eid in named if eid in ledger.entities], "relevance", now)
    if asked is not None and asked in ledger.entities:
        ranked = [ledger.entities[asked], *(e for e in ranked if e.id != asked)]
    return ranked[:limit]


def entities_note(entities: Sequence[Entity], language: str) -> str | None:
    """One line naming `entities` with their kind, mention count and last mention; None when none."""
    if not entities:
        return None
    zh = language.lower().startswith("zh")
    parts = []
    for entity in entities:
        kind = getattr(entity.kind, "value", entity.kind)
        last = f"{as_aware(entity.last_mentioned_at):%Y-%m-%d}" if entity.last_mentioned_at else None
        if zh:
            detail = f"{kind}；提到{entity.mention_count}次" + (f"，最近{last}" if last else "")
            parts.append(f"{entity.name}（{detail}）")
        else:
            detail = f"{kind}; {entity.mention_count} mentions" + (f", last {last}" if last else "")
            parts.append(f"{entity.name} ({detail})")
    return (ENTITIES_LABEL["zh"] + "；".join(parts)) if zh else ENTITIES_LABEL["en"] + "; ".join(parts)
