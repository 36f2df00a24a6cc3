"""What the message's own casing says about an English name a model proposes: the casing is the
message's, not the model's. Chinese (a name holding a CJK character) has no case and is left alone.

A small model often proposes a proper name with the common nouns that follow it in the sentence
("Harry Potter fan"), and capitalises common nouns as if they were names ("Adoption agencies" for
"looking into adoption agencies"). Neither is a name the user says, and an entity made of either
would be a false one, or would hold none of the name's later mentions.

- `named_head` cuts a phrase to its proper part when the message writes it as one or more words with
  a capital letter (or a digit), followed only by lower-case words: "Harry Potter fan" is Harry
  Potter, "an LGBTQ support group" names LGBTQ. A lower-case function word after the head keeps the
  phrase whole ("The Lord of the rings", a title in sentence case), and so does a capital after it
  ("Game of Thrones"). A head of one word at the start of a sentence, capitalised there only because
  it starts it ("Pottery class was fun"), is not cut: the capital says nothing about the word, while
  a word with a capital inside it ("LGBTQ", "iPhone") or a head of two words is a name wherever it
  stands. A text that is the phrase alone is a name given as it is (a speaker's name), whole.
- `written_in_lower_case` tells a model's capitals from the message's: true when every time the
  message says the name it writes it in lower case, without a digit ("adoption agencies"), while it
  writes capitals elsewhere, other than the pronoun "I". A message without any capital says nothing
  (people who chat in lower case write "paris" too), so it is false there.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..storage.text_analysis import CJK, STOP_WORDS
from .matching import whole_words

_WORD = re.compile(r"\S+")
_LOWER_WORD = re.compile(r"[a-z]+(?:['’-][a-z]+)*")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\"“”\n(\[])\s*$")
_TRAILING_PUNCTUATION = ".,;:!?\"'“”‘’)]"
_PRONOUN_I = re.compile(r"(?<![\w'’-])I(?:['’](?:m|ve|ll|d))?(?![\w'’-])")


def _proper_word(word: str) -> bool:
    return any(char.isupper() or char.isdigit() for char in word)


def _inner_capital(word: str) -> bool:
    return any(char.isupper() for char in word[1:])


def _check(name: object, text: object) -> None:
    if not isinstance(name, str) or not isinstance(text, str):
        raise TypeError("name and text must be str")


def _said(words: list[str], text: str) -> Iterator[tuple[int, int]]:
    """Each place `text` says the words (whole words, any case, any white space between)."""
    return whole_words(r"\s+".join(re.escape(word) for word in words), text, re.IGNORECASE)


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
    _check(name, text)
    words = name.split()
    if len(words) < 2 or CJK.search(name) or text.split() == words:
        return name
    for start, end in _said(words, text):
        written = _WORD.findall(text[start:end])
        sentence_start = _SENTENCE_END.search(text[max(0, start - 80):start]) is not None  # bounded: texts are long
        head = _head_words(written, sentence_start)
        if head:
            return " ".join(written[:head]).rstrip(_TRAILING_PUNCTUATION) or name
    return name


def written_in_lower_case(name: str, text: str) -> bool:
    """Whether `text`, whose writer uses capitals, writes `name` in lower case each time it says it
    (the module's rules): a model's capitals on a common noun. False for Chinese, for a name the
    text does not say as written, and for a text without capitals. Raises TypeError when either is
    not a str."""
    _check(name, text)
    words = name.split()
    if not words or CJK.search(name):
        return False
    written = [text[start:end] for start, end in _said(words, text)]
    if not written or any(_proper_word(form) for form in written):
        return False
    rest = _PRONOUN_I.sub(" ", text)
    return any(char.isupper() for char in rest)
