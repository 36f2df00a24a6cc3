"""The proper name at the head of an English phrase a model proposes as a name ("Harry Potter fan"
is Harry Potter, "an LGBTQ support group" names LGBTQ), read from how the message writes it.

A small model often proposes a proper name with the common nouns that follow it in the sentence.
The phrase is not a name, and it would never be said again as written, so the entity it made would
hold none of the later mentions of the name. `named_head` cuts such a phrase to its proper part when
the message writes it as one or more words with a capital letter (or a digit), followed only by
lower-case words:

- the casing is the message's, not the model's: "Star wars" proposed for "Star Wars" is whole, and
  "harry potter fan" proposed for "Harry Potter fan" is cut;
- a lower-case function word after the head keeps the phrase whole ("The Lord of the rings", a
  title in sentence case), and so does a capital after it ("Game of Thrones");
- a head of one word at the start of a sentence, capitalised there only because it starts it
  ("Pottery class was fun"), is not cut: the capital says nothing about the word. A word with a
  capital inside it ("LGBTQ", "iPhone") or a head of two words is a name wherever it stands;
- a text that is the phrase alone is a name given as it is (a speaker's name, "Mary Ann smith"), whole;
- Chinese (a phrase holding a CJK character) is never cut: it has no case.
"""

from __future__ import annotations

import re

from ..storage.text_analysis import CJK, STOP_WORDS

_WORD = re.compile(r"\S+")
_LOWER_WORD = re.compile(r"[a-z]+(?:['’-][a-z]+)*")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\"“”\n(\[])\s*$")
_TRAILING_PUNCTUATION = ".,;:!?\"'“”‘’)]"


def _proper_word(word: str) -> bool:
    return any(char.isupper() or char.isdigit() for char in word)


def _inner_capital(word: str) -> bool:
    return any(char.isupper() for char in word[1:])


def _head_words(written: list[str], sentence_start: bool) -> int:
    """How many of `written`'s words are the proper head, or 0 when the phrase is to stay whole."""
    head = 0
    while head < len(written) and _proper_word(written[head]):
        head += 1
    tail = written[head:]
    if head == 0 or not tail:
        return 0
    if not all(_LOWER_WORD.fullmatch(word) and word not in STOP_WORDS for word in tail):
        return 0
    if head == 1 and sentence_start and not _inner_capital(written[0]):
        return 0
    return head


def named_head(name: str, text: str) -> str:
    """`name`, or the proper name at its head when `text` writes `name` as that name followed by
    lower-case common words (the module's rules). The head is returned as `text` writes it.
    Raises TypeError when either is not a str."""
    if not isinstance(name, str) or not isinstance(text, str):
        raise TypeError("name and text must be str")
    words = name.split()
    if len(words) < 2 or CJK.search(name) or text.split() == words:
        return name
    pattern = r"(?<![\w-])" + r"\s+".join(re.escape(word) for word in words) + r"(?![\w-])"
    for found in re.finditer(pattern, text, re.IGNORECASE):
        written = [match.group() for match in _WORD.finditer(found.group())]
        sentence_start = _SENTENCE_END.search(text[:found.start()]) is not None
        head = _head_words(written, sentence_start)
        if head:
            return " ".join(written[:head]).rstrip(_TRAILING_PUNCTUATION) or name
    return name
