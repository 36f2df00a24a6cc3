"""The personal names of a run, and whether a procedure's text copies one.

A procedure is shown to every user of the agent (of the team), so it must not carry a name one user's
run holds. What counts as a name is judged against the run itself, by the rules `record` finds names
with (no model):

* the user's id (and its part after a team prefix ``acme:``), the speakers' names, and the names and
  aliases of the people and pets the users' ledgers know (`step` passes them: what shows "mira",
  written in lower case in the run, to be the user's sister), each word of a name of several words too;
* the names the user's and the agent's messages write (`person.record_names.names_in`: the casing of
  English, relation words and naming phrases of Chinese) when the rules read them as a person, a pet
  or a name of unknown kind; a place, an organisation, a language or a festival the dictionary knows is
  no person. The words of a name of several words count alone too ("Anna Li": "Anna", "Li"), less the
  first word of one that opens a sentence (its capital says nothing: "Call Anna");
* Chinese names the dictionary tags as a person's (``nr``) that begin with a surname (or are a 小 / 老
  / 阿 nickname), with the word's first two or three characters (the tagger may glue the next word
  on: 王芳订); one tagged so in the procedure is its own if the run's messages hold it;
* the values of the calls' person arguments (a key such as ``name``, ``guest_name``, ``contact``,
  ``recipient``; a bare ``name`` unless the tool is about a city, a file, a restaurant...), as the run
  wrote them: the only evidence of a name the user wrote in lower case. The whole value of an
  argument that names a tool's own term (``category``, ``label``, ``unit``: "Meals") is no name.

Never a name here: a called tool, an argument key, a code-like word, a word in capitals only ("ISO",
"UTC", "JSON"), a role word a user id may be ("user", "guest", "admin"), a weekday or a month, a
language or a nationality ("German", "Chinese"), a title alone, a function word (a name that is one,
"Will", matches only as written). Words are matched whole and case-insensitively; a Chinese name as
a substring.

A lower-case name nothing gives evidence of (the user wrote "call anna back", and neither the run nor
the ledger names her) is not seen; a capitalised word the rules cannot type (a product, a city:
"Excel", "Berlin") is refused like a name: the check errs on the side of the user's privacy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..person import dictionary_names
from ..person.matching import SURNAME_PATTERN, is_function_word, usable_name
from ..person.record_names import names_in
from ..storage.text_analysis import STOP_WORDS
from ..types import EntityKind

if TYPE_CHECKING:
    from .run import Run

_PERSONAL_KINDS = frozenset({EntityKind.PERSON, EntityKind.PET, EntityKind.UNKNOWN})
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
_CHINESE_NAME = re.compile(f"(?:{SURNAME_PATTERN}|[小老阿]{SURNAME_PATTERN})[\u4e00-\u9fff]{{1,3}}")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]['\"’”)]*)\s*$")
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam"})
# words a user id may be that a procedure says of anyone ("ask the user"): no one's name
_ROLE_WORDS = frozenset("""user users customer client guest admin administrator default anonymous test tester
    demo owner member visitor me you agent assistant system bot 用户 客户 客人 访客""".split())
_PERSON_KEY_WORDS = frozenset({"name", "guest", "contact", "customer", "person", "recipient", "attendee", "passenger",
                               "patient", "user", "username", "owner", "member", "client", "traveller", "traveler",
                               "sender", "assignee", "姓名", "联系人", "收件人", "客人", "乘客"})
_NOT_PERSON_KEY_WORDS = frozenset("""file tool city place restaurant hotel company product column field project repo
    branch label category event calendar folder path host domain model server station stock shop store airport
    country street venue image""".split())
# argument names whose values are a tool's own terms, not what a user said of anyone
_VOCABULARY_KEY_WORDS = frozenset("""category label tag type kind currency unit format language lang locale status
    mode carrier column field table sort order priority level""".split())
#: languages and nationalities (their adjectives and nouns), which a capital does not make a name
LANGUAGES_AND_NATIONALITIES = frozenset("""
    english british american canadian australian irish scottish welsh german germans french spanish
    italian portuguese dutch flemish belgian swiss austrian danish swedish norwegian finnish icelandic
    polish czech slovak hungarian romanian bulgarian greek turkish russian ukrainian belarusian serbian
    croatian bosnian slovenian albanian estonian latvian lithuanian chinese mandarin cantonese japanese
    korean vietnamese thai malay indonesian filipino tagalog hindi urdu bengali punjabi tamil telugu
    marathi gujarati nepali sinhala persian farsi arabic hebrew kurdish pashto amharic swahili zulu
    xhosa afrikaans yoruba igbo hausa somali mexican brazilian argentinian argentine chilean peruvian
    colombian venezuelan cuban indian pakistani bangladeshi egyptian moroccan nigerian kenyan ethiopian
    israeli iranian iraqi saudi emirati qatari european asian african latin latino latina esperanto
    catalan basque galician maori hawaiian taiwanese singaporean
    """.split())


def run_names(run: Run, private: Iterable[str]) -> set[str]:
    """The personal names of `run` (module rules), as written; `private` are the user's id, the
    speakers' names and the names the users' ledgers know."""
    names: set[str] = set()
    for word in private:
        names |= {word, word.rsplit(":", 1)[-1]} | set(word.split() if " " in word else ())
    for stored in run.messages:
        message = stored.message
        if message.tool_call is None and message.role in ("user", "assistant"):
            names |= _written_names(message.content)
            names |= _tagged_chinese_names(message.content)
    terms = _vocabulary(run)
    names = {name for name in names if name.casefold() not in terms}
    return {name for name in names | _person_values(run) if _may_be_a_name(name, run)}


def copied_name(text: str, run: Run, names: set[str]) -> str | None:
    """The first of `names` `text` holds (module rules), or a Chinese name tagged in `text` that the
    run's messages hold; None when it holds none."""
    folded = text.casefold()
    for name in sorted(names, key=len, reverse=True):
        if _HAN.search(name):
            if name in text:
                return name
        elif is_function_word(name) or name.casefold() in STOP_WORDS:
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
                return name
        elif re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", folded):
            return name
    said = "\n".join(m.message.content for m in run.messages
                     if m.message.tool_call is None and m.message.role in ("user", "assistant"))
    for name in _tagged_chinese_names(text):
        if name in said and _may_be_a_name(name, run):
            return name
    return None


def _person_key(tool: str, key: str) -> bool:
    """Whether argument `key` of `tool` holds a person's name (``guest_name``; not ``name`` of
    ``lookup_city``)."""
    words = _words(key)
    if words & _NOT_PERSON_KEY_WORDS or not words & _PERSON_KEY_WORDS:
        return False
    return words != {"name"} or not _words(tool) & _NOT_PERSON_KEY_WORDS


def _words(identifier: str) -> set[str]:
    """The words of an identifier, lower case and singular (``guestNames`` -> guest, name)."""
    words = re.split(r"[_\-\s.]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", identifier).lower())
    return {word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
            for word in words if word}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, (list, tuple)) else []


def _person_values(run: Run) -> set[str]:
    return {text for m in run.calls if m.message.tool_call is not None
            for key, value in m.message.tool_call.arguments.items()
            if _person_key(m.message.tool_call.name, key) for text in _strings(value)}


def _vocabulary(run: Run) -> set[str]:
    """The whole values of the calls' arguments that name one of a tool's own terms (a category, a
    label, a unit: "Meals"), casefolded."""
    return {text.casefold() for m in run.calls if m.message.tool_call is not None
            for key, value in m.message.tool_call.arguments.items()
            if _words(key) & _VOCABULARY_KEY_WORDS for text in _strings(value)}


def _written_names(text: str) -> set[str]:
    found: set[str] = set()
    for name in names_in(text):
        if name.kind not in _PERSONAL_KINDS:
            continue
        found.add(name.name)
        words = name.name.split()
        if len(words) > 1:
            at = text.find(name.name)
            starts = at >= 0 and _SENTENCE_START.search(text[max(0, at - 80):at]) is not None
            found |= set(words[1:] if starts else words)
        if name.name.endswith(("'s", "’s")):
            found.add(name.name[:-2])
    return found


def _tagged_chinese_names(text: str) -> set[str]:
    if not _HAN.search(text):
        return set()
    found: set[str] = set()
    for word, tag in dictionary_names.tagged_words(text):
        if tag.startswith("nr") and 2 <= len(word) <= 4 and _CHINESE_NAME.fullmatch(word):
            found |= {word} | {word[:size] for size in range(2, len(word))}
    return found


def _may_be_a_name(name: str, run: Run) -> bool:
    """Whether `name` may be a personal name: none of the words the module says never are."""
    plain = name.strip().rstrip(".").replace("’", "'")
    folded = plain.casefold()
    if not usable_name(plain) or (plain.isascii() and plain.isupper()):
        return False
    if folded in LANGUAGES_AND_NATIONALITIES or folded in _TITLES or "_" in plain:
        return False
    if folded in _CALENDAR or folded in _ROLE_WORDS or plain.isdigit():
        return False
    keys = {key.casefold() for m in run.calls if m.message.tool_call is not None
            for key in m.message.tool_call.arguments}
    return folded not in {tool.casefold() for tool in run.tool_names()} and folded not in keys


_CALENDAR = frozenset("""monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri
    sat sun january february march april may june july august september october november december jan feb mar apr
    jun jul aug sep sept oct nov dec""".split())
