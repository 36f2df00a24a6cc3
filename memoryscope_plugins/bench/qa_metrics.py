"""Answer metrics of `bench qa`: token F1 as the LoCoMo paper computes it, and containment.

English follows LoCoMo's evaluation script (task_eval/evaluation.py): commas removed, lower case,
punctuation removed, the words a/an/the/and removed, every word Porter-stemmed; for multi-hop
questions (category 1) gold and answer are split on commas and each gold part takes its best F1
against the answer's parts (the mean over gold parts); for open-domain questions (category 3) only
the gold's part before a ";" counts. Chinese has no spaces between words, so a Chinese gold
answer is scored on characters (each CJK character one token, Latin words and numbers one token
each), after removing punctuation.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from functools import lru_cache

import Stemmer

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ZH_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = set(string.punctuation)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("porter")  # the original Porter algorithm, as LoCoMo's script uses


def is_chinese(text: str) -> bool:
    """Whether a gold answer is scored as Chinese (it holds a CJK character)."""
    return bool(_CJK.search(text))


def normalise_en(text: str) -> str:
    """LoCoMo's normalize_answer: no commas, lower case, no punctuation, no articles, single spaces."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def tokens(text: str, chinese: bool) -> list[str]:
    """The tokens F1 counts: stemmed English words, or Chinese characters plus Latin words/numbers."""
    if chinese:
        folded = unicodedata.normalize("NFKC", text).lower()
        return _ZH_TOKEN.findall(folded)
    return [_stemmer().stemWord(word) for word in normalise_en(text).split()]


def _f1(prediction: list[str], gold: list[str]) -> float:
    common = Counter(prediction) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(prediction)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(answer: str, gold: str, category: int | None = None) -> float:
    """Token F1 of `answer` against `gold` (see the module docstring for the per-category rules)."""
    chinese = is_chinese(gold)
    if chinese:
        return _f1(tokens(answer, True), tokens(gold, True))
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        parts = [p for p in (answer.split(",")) if p.strip()] or [answer]
        golds = [g for g in gold.split(",") if g.strip()] or [gold]
        return sum(max(_f1(tokens(p, False), tokens(g, False)) for p in parts) for g in golds) / len(golds)
    return _f1(tokens(answer, False), tokens(gold, False))


def contains(answer: str, gold: str) -> bool:
    """Whether the normalised gold answer appears in the normalised answer (whole words for
    English, characters for Chinese)."""
    chinese = is_chinese(gold)
    gold_tokens, answer_tokens = tokens(gold, chinese), tokens(answer, chinese)
    if not gold_tokens:
        return False
    if chinese:
        return "".join(gold_tokens) in "".join(answer_tokens)
    size = len(gold_tokens)
    return any(answer_tokens[i:i + size] == gold_tokens for i in range(len(answer_tokens) - size + 1))
