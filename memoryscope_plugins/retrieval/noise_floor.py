"""An embedder's noise floor: the cosine it gives unrelated texts, per language.

Raw cosines mean different things per model and language: all-MiniLM-L6-v2 puts an unrelated
English question and statement near 0.05 but any two Chinese sentences near 0.56;
multilingual-e5 puts unrelated English near 0.72 and Chinese near 0.82. `calibrated` rescales a
cosine so that the floor is 0 and identical texts are 1, so one threshold (the relevance floor,
consolidation's repeat and contradiction checks) holds for every embedder and language.

The floor is measured once per embedder, language and kind of comparison (a query against a
document for retrieval, two statements for consolidation) from a few fixed pairs, and cached.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from ..indexing import embedding_text
from ..types import Memory

# A question or request and a statement about something else, the shape of a retrieval query
# against a stored memory.
UNRELATED_QUERIES: Mapping[str, Sequence[tuple[str, str]]] = {
    "en": [("What is the weather like today?", "My computer broke down last week."),
           ("Does she play any instrument?", "The train leaves at noon."),
           ("Where did you buy those shoes?", "Our dog is afraid of thunder."),
           ("How much does a ticket cost?", "I planted tomatoes in the garden."),
           ("Who won the football match?", "She is learning to bake bread."),
           ("When is the dentist appointment?", "The museum closes on Mondays."),
           ("What is 2 + 2?", "We adopted a kitten in March."),
           ("Tell me a joke.", "My brother moved to Berlin for work.")],
    "zh": [("今天天气怎么样？", "我的电脑上周坏了。"), ("她会弹什么乐器？", "火车中午出发。"),
           ("那双鞋在哪里买的？", "我们的狗怕打雷。"), ("一张票多少钱？", "我在花园里种了西红柿。"),
           ("谁赢了足球比赛？", "她在学烤面包。"), ("牙医预约是什么时候？", "博物馆周一闭馆。"),
           ("二加二等于几？", "我们三月领养了一只小猫。"), ("给我讲个笑话。", "我哥哥搬到柏林工作了。")],
}

_FLOORS: dict[tuple[str, str, str, int], float] = {}
_LOCK = threading.Lock()


def noise_floor(embedder: Any, language: str, *, second_language: str | None = None,
                pairs: Mapping[str, Sequence[tuple[str, str]]] = UNRELATED_QUERIES,
                second: Literal["document", "query"] = "document") -> float:
    """The mean cosine of `pairs` in `language` (English pairs for other languages): the first
    text of each pair embedded as a query, the second, taken from the pairs of
    `second_language` (default: the same), as `second`. Cached per embedder name.

    Across languages the floor differs: multilingual-e5 puts a Chinese question and an unrelated
    English statement at 0.71, two unrelated Chinese texts at 0.82; a floor measured in the
    query's language alone would cut every cross-lingual match."""
    second_language = second_language or language
    key = (str(getattr(embedder, "name", type(embedder).__name__)), f"{language}>{second_language}", second,
           id(pairs))
    with _LOCK:
        if key in _FLOORS:
            return _FLOORS[key]
    chosen = pairs.get(language) or pairs["en"]
    others = pairs.get(second_language) or pairs["en"]  # the same topics in order: pair i stays unrelated
    firsts = embedder.embed([first for first, _ in chosen], kind="query")
    seconds = embedder.embed([other for _, other in others], kind=second)
    floor = float(sum(float(firsts[i] @ seconds[i]) for i in range(len(chosen))) / len(chosen))
    floor = min(0.9, max(0.0, floor))
    with _LOCK:
        _FLOORS[key] = floor
    return floor


# the date the anchors of `query_floor` carry (memories are embedded dated, see indexing.dated_text)
_ANCHOR_DATE = datetime(2000, 1, 1, tzinfo=timezone.utc)
_ANCHORS: dict[tuple[str, str], np.ndarray] = {}


def query_floor(embedder: Any, query_vector: np.ndarray, memory_language: str, *,
                pairs: Mapping[str, Sequence[tuple[str, str]]] = UNRELATED_QUERIES) -> float:
    """This query's own noise floor: its mean cosine to statements about other things in
    `memory_language` (the second texts of `pairs`), embedded the way memories are (dated, with a
    speaker). The embedder's floor is a mean over content-bearing questions; a query with little
    content of its own ("ok", "hello", "thanks!") sits closer to every memory, and to these
    statements alike, so measured against them it clears no memory by much. The statements'
    vectors are embedded once per embedder and cached."""
    key = (str(getattr(embedder, "name", type(embedder).__name__)), memory_language)
    with _LOCK:
        anchors = _ANCHORS.get(key)
    if anchors is None:
        statements = [statement for _, statement in (pairs.get(memory_language) or pairs["en"])]
        texts = [embedding_text(Memory(id="anchor", user_id="anchor", agent_id="anchor", content=statement,
                                       speaker="user", created_at=_ANCHOR_DATE), embedder)
                 for statement in statements]
        anchors = np.asarray(embedder.embed(texts, kind="document"), dtype=np.float32)
        with _LOCK:
            _ANCHORS[key] = anchors
    return min(0.9, max(0.0, float((anchors @ np.asarray(query_vector, dtype=np.float32)).mean())))


def calibrated(cosine: float, floor: float) -> float:
    """A cosine rescaled so that the embedder's noise floor is 0 and identical texts are 1 (never
    below 0)."""
    return max(0.0, (cosine - floor) / (1.0 - floor))
