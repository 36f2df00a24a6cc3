"""Turn text into search terms: the same analysis for what is stored and what is asked.

English words are lower-cased, stop words dropped and the rest stemmed (Snowball, via PyStemmer);
CJK text, which has no spaces, is indexed as single characters and overlapping bigrams, so a
Chinese query matches without a word segmenter. The stored content itself is never altered.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")

# A short list: question words and function words that carry no topic. Kept small so that
# words with meaning ("not", "never", "first") still count.
STOP_WORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during before
    after above below to from up down in out on off over under again further then once here there
    all any both each few more most other some such own same so than too very s t can will just
    don should now i me my myself we our ours ourselves you your yours yourself yourselves he him
    his himself she her hers herself it its itself they them their theirs themselves what which who
    whom this that these those am is are was were be been being have has had having do does did
    doing would could ought i'm you're he's she's it's we're they're i've you've we've they've i'd
    you'd he'd she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't
    hasn't haven't hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't cannot
    couldn't mustn't let's that's who's what's here's there's when's where's why's how's how why
    when where also as yes yeah oh ok okay hey hi wow really""".split()
)

# Single CJK characters that are grammar, not topic; their bigrams are still indexed.
CJK_STOP_CHARS = frozenset("的了是我你他她它们在吗呢吧啊呀哦嗯这那就也都和与")

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def _cjk_terms(run: str) -> list[str]:
    chars = [c for c in run if CJK.match(c)]
    terms = [c for c in chars if c not in CJK_STOP_CHARS]
    terms.extend(a + b for a, b in zip(chars, chars[1:]))
    return terms


@lru_cache(maxsize=8192)
def term_set(text: str) -> frozenset[str]:
    """The distinct search terms of a text (`analyse`), cached: ranking asks again and again which
    terms the same memories hold."""
    return frozenset(analyse(text))


def analyse(text: str) -> list[str]:
    """The search terms of a text, in order, with repeats (term frequency matters to BM25)."""
    terms: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        if CJK.search(word):
            # split mixed runs ("iPhone手机") into their Latin and CJK parts
            for part in re.split(r"((?:" + CJK.pattern + r")+)", word):
                if not part:
                    continue
                if CJK.match(part):
                    terms.extend(_cjk_terms(part))
                else:
                    _add_word(part.lower(), terms)
        else:
            _add_word(word.lower(), terms)
    return terms


def _add_word(word: str, terms: list[str]) -> None:
    if word in STOP_WORDS:
        return
    base = word.split("'", 1)[0] if "'" in word else word
    if not base or base in STOP_WORDS:
        return
    terms.append(_stem(base))
