"""Does a query ask about the present? "Where does she work now?", "用户目前的感情状况如何？"

Such a question wants the latest state of something that may have changed, so among memories of
similar relevance the newer should rank first (`ranking.prefer_recent`). A question without these
words ("where did she work in 2022?", "what did I say about my job?") is ranked with no regard to
age. No LLM: a short list of words per language.
"""

from __future__ import annotations

import re

_PRESENT = re.compile(
    r"\b(now|nowadays|currently|current|these days|at the moment|at present|still|lately|recently|"
    r"anymore|any more|latest|so far|up to now|as of)\b|"
    r"现在|目前|如今|眼下|当前|最近|近来|近期|这些天|这阵子|还在|仍然|依然|至今|到现在|最新",
    re.IGNORECASE,
)


def asks_about_present(query: str) -> bool:
    """Whether `query` asks about how things are now (English and Chinese)."""
    return bool(_PRESENT.search(query))
