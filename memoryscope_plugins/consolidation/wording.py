"""Checks on what the model wrote, against what the message really says.

A small model copies the user's sentence verbatim ("I'm allergic to shellfish") and invents or
translates time words the message does not hold. These checks make the stored observation honest
without another model call:

* `grounded`: most of an observation's words must be in its own message (or, for a short reply,
  the line it answers): a small model puts a later message's content, or the assistant's
  opinion, under the wrong message;
* `third_person`: first-person text is framed as the speaker's words (``Maria said: "I'm ..."``),
  so a memory never reads as the assistant's own first person;
* `time_words_in`: the time words the model quotes count only when the source message holds them.
"""

from __future__ import annotations

import re

from ..storage.text_analysis import analyse

SHORT_REPLY_WORDS = 8  # a reply this short is read with the line it answers ("Yes, last week!")
SHORT_REPLY_CJK_CHARS = 12
MIN_GROUNDED_SHARE = 1 / 3  # paraphrases reword; a wrong message shares next to nothing
ASSISTANT_COPY_SHARE = 0.6  # an observation this much made of the assistant's reply, and less of the user's words

_FIRST_PERSON_EN = re.compile(r"(?:^|[^\w'])(?:I|I'm|I've|I'd|I'll|my|My|me|mine|myself)(?=$|[^\w'])")
_FIRST_PERSON_ZH = re.compile(r"我(?!们)")
_FOLD = re.compile(r"[\s\W_]+", re.UNICODE)


def is_first_person(text: str, language: str) -> bool:
    """Whether the observation speaks as the user ("I", "my"; "我") instead of about them."""
    if language == "zh":
        return bool(_FIRST_PERSON_ZH.search(text))
    return bool(_FIRST_PERSON_EN.search(text))


def third_person(content: str, speaker: str, language: str) -> str:
    """``content`` if it already speaks about people (or names the speaker, as reported speech
    does); else framed as what ``speaker`` said."""
    if not is_first_person(content, language) or (speaker and speaker.casefold() in content.casefold()):
        return content
    quoted = content.strip().strip('"“”')
    return f"{speaker}说：“{quoted}”" if language == "zh" else f'{speaker} said: "{quoted}"'


def time_words_in(expression: str | None, message: str) -> bool:
    """Whether the time words the model quoted appear in the message (case, spacing and
    punctuation aside)."""
    if not expression:
        return False
    needle = _FOLD.sub(" ", expression.casefold()).strip()
    haystack = _FOLD.sub(" ", message.casefold())
    return bool(needle) and needle in haystack


def grounded(content: str, message: str, answered: str | None, names: frozenset[str]) -> bool:
    """Whether a third or more of the observation's words (names aside) are in its message, or, for
    a short reply, in the message and the line it answers."""
    terms = [t for t in analyse(content) if t not in names]
    if not terms:
        return True
    source = message
    cjk = bool(re.search(r"[\u3400-\u9fff]", message))
    short = len(message.strip()) <= SHORT_REPLY_CJK_CHARS if cjk else len(message.split()) <= SHORT_REPLY_WORDS
    if answered and short:
        source = f"{answered}\n{message}"
    available = set(analyse(source))
    return sum(term in available for term in terms) / len(terms) >= MIN_GROUNDED_SHARE


def copies_the_reply(content: str, message: str, reply: str | None, names: frozenset[str]) -> bool:
    """Whether an observation is the assistant's reply rather than the user's message ("Biscuit is a
    great name!" under "I have a golden retriever called Biscuit."): most of its words (names aside)
    are in the reply, and more of them than in the message."""
    if not reply:
        return False
    terms = [t for t in analyse(content) if t not in names]
    if not terms:
        return False
    in_reply = set(analyse(reply))
    in_message = set(analyse(message))
    reply_share = sum(term in in_reply for term in terms) / len(terms)
    message_share = sum(term in in_message for term in terms) / len(terms)
    return reply_share >= ASSISTANT_COPY_SHARE and reply_share > message_share
