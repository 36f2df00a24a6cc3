"""English proper names a message writes, read from its own casing, without a model.

`record` uses this to find names no model has seen yet (`record_names`). The writer's capitals are
the evidence, so the rules are about what a capital does and does not say:

- A **name** is a run of capitalised words (a capital first, or inside: "LGBTQ", "iPhone",
  "MinaLima"), separated by spaces only, with lower-case "of", "the", "de", "van"... allowed between
  two of them ("Game of Thrones", "Cliffs of Moher"); inside a sentence, a capitalised function word
  before a capitalised word begins or joins one ("Under Armour"; "The Beatles" is Beatles, the
  article off). A possessive at its end is dropped ("Sheeran's" -> Sheeran); an initial or a title
  with a dot joins the word after it ("J.K. Rowling", "Dr. Lee"). A run of a name and its short
  form ("we call Melanie Mel") is two names; a single word that is a word of a longer name the
  message writes is not one of its own ("the real Potter places" beside "Harry Potter").
- Capitalised words that are **not names** break a run and are never one: function words and
  pronouns ("I", "I'm", "The", "It": `STOP_WORDS`), weekdays and months (and their short forms:
  "Fri", "Sept"), common-noun abbreviations ("TV", "OK", "AI", "App", "RPGs": `COMMON_ABBREVIATIONS`),
  a relation word alone ("Mom", "Grandma": `relations.english_relation_word`; "Aunt May" is a name),
  a greeting or interjection ("Congrats", "Thanks": `_OPENERS`, also at a run's start: "Thanks Caroline"),
  roman numerals, titles and head words alone ("Dr", "the Hospital"), and a word with a digit alone
  ("B12", "5K", "Omega-3"; "Civilization VI" and "Kustom K-200A" are names).
- **Sentence starts**: a capital on a sentence's first word says nothing ("Pottery class was fun").
  A single word there is not a name, unless it has a capital inside ("LGBTQ+ pride") or "and" joins
  it to a name or to "I" ("Luna and Oliver!"; "Anthony and I went", a person); a run of
  two or more is, less its first word when that is an opener ("Yep John", "Thanks Caroline",
  "Sounds great", "Adding NYC": a greeting or interjection, an -ly or -ing word; `_OPENERS`), except
  right after an opening quote, where a title begins ("“Becoming Nicole” by ..."). A Latin word
  beside Chinese characters (我用Figma画图) is never at a sentence start: Chinese has no capitals to
  mark one; but one in capitals only written against a Chinese character before it is part of a
  Chinese name or an abbreviation (秦PLUS DM-i, 当UI设计师), not a name.
- **Titles in quotes**: a quotation of two to six words in title case (each capitalised but for
  function words: "A Dance with Dragons", "Home Alone") is one name, as written.
- **Escapes**: a line break written out ("\\n", "\\t") is a line break, so "\\nB:" holds no word "nB".
- **What a message says about case**: one without capitals (besides the pronoun I) says nothing
  ("i went to paris"); nor does a sentence written all in capitals or title case (every word of four
  letters or more capitalised, and a function word after the first too: "OMG I LOVE THIS SO MUCH",
  "My Trip To Paris Was Great"; "Then Lake Tahoe and Pine Street" is names).
- **Kinds**: a run of two words or more that begins or ends with an organisation's head word ("Hospital",
  "University", "Club", "Studios"...) is an organisation, with a place's ("Street", "Park", "Lake",
  "Mountains"...) a place; a name right after a relation word in lower case is a person ("my sister
  Ruth") or a pet ("our cat Miso": `relations.kind_said_before`); any other name is `unknown`, for
  consolidation's model to type.

Pure functions: no store, no model; one pass of a few regular expressions over the text.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from ..storage.text_analysis import STOP_WORDS
from ..types import EntityKind
from .relations import english_relation_word, kind_said_before

MAX_WORDS = 6  # a longer run is a heading or a list, not one name


class CasedName(NamedTuple):
    """A name as the message writes it, where it starts, and its kind (`unknown` unless a rule says)."""

    name: str
    start: int
    kind: EntityKind


_LATIN = "A-Za-z0-9\u00c0-\u024f"
_TOKEN = re.compile(f"[{_LATIN}](?:[{_LATIN}&+]|['’.\\-](?=[{_LATIN}]))*")
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")
# what ends a sentence or a clause in Latin writing (a dash: "Family is key - Even so")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\n(\[…\-–—]|[.!?]['\"’”)]*)\s*$")
_OPEN_QUOTE = re.compile(r"(?:(?:^|[\s(\[])[\"']|[“‘«])\s*$")  # not the apostrophe of "the kids' Nike"
_LOOKBACK = 80  # the characters before a word read to tell where it stands (never the whole text: it may be long)
_CONNECTORS = frozenset({"of", "the", "de", "da", "del", "della", "di", "du", "des", "la", "le", "van", "von", "der",
                         "den", "y", "e", "al", "el", "bin"})
# function words a name may begin or hold, written with a capital: "Under Armour", "Lord Of The Rings"
_NAME_FUNCTION_WORDS = frozenset("""the a an of under into over out up down off about after before between through
    from with for in on at by to""".split())
_ARTICLES = ("the ", "a ", "an ")
_COORDINATED = re.compile(r"\s+(?:and|&)\s+(?:(?P<me>I|me)\b|[A-Z])")
_ESCAPES = re.compile(r"\\[nrt]")  # escape sequences written out in a text
_INITIALS = re.compile(r"(?:[A-Z]\.)*[A-Z]")  # "J.K", "R": joined to the name after their dot
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "mt", "ft", "jr", "sr"})
# weekdays, months, their short forms, and the words said with them ("Last Friday", "Next May")
_CALENDAR = frozenset("""monday tuesday wednesday thursday friday saturday sunday mon tue tues wed weds thu thur
    thurs fri sat sun january february march april may june july august september october november december feb
    mar apr jun jul aug sep sept oct nov dec yesterday today tomorrow tonight weekend last next early late mid
    every past coming""".split())
#: Capitalised abbreviations that are common nouns, not names (compared in lower case, a plural "s" off).
COMMON_ABBREVIATIONS = frozenset("""ok okay tv pc ai ui ux app apps diy vr ar gps pdf ppt usb id ceo cfo cto coo hr
    er icu pt pe rpg mmo mmorpg fps moba npc dlc pvp faq fyi btw lol lmao omg brb tbh idk imo imho asap rsvp bbq atm
    suv dvd cd mp3 html css sql api url wifi am pm ad bc ps aka vs etc ac mba phd bs ba ma msc gpa sat ielts toefl
    dj mc nsfw irl dm ootd ngl smh fomo""".split())
_ROMAN = re.compile(r"[IVXLC]+")
_OPENERS = frozenset("""hey hi hello yo thanks thank bye goodbye congrats congratulations dear sorry please welcome
    oh ah aw aww awww ooh wow woah whoa woohoo yay yeah yep yup yes no nope nah sure alright okay ok cool nice great
    awesome amazing glad good happy love loved miss missed hope bet well so lol haha hmm um uh also besides just
    maybe plus guess anyway btw omg gosh man dude cheers""".split())
_ORGANISATION_HEADS = frozenset("""hospital clinic university college school academy institute church museum library
    club company inc ltd llc corp corporation bank studios studio cafe café restaurant bar pub hotel society
    association foundation council team league agency center centre gallery theatre theater""".split())
_PLACE_HEADS = frozenset("""street st road rd avenue ave lane boulevard park lake river mountain mountains mount mt
    beach bay island islands city county valley canyon falls tower square station airport bridge forest desert
    coast village town hill hills sea ocean""".split())


def _capitalised(word: str) -> bool:
    return word[0].isupper() or (word[0].isalpha() and any(char.isupper() for char in word[1:]))


def _folded(word: str) -> str:
    return word.lower().replace("’", "'")


def _not_a_name_word(word: str) -> bool:
    """A capitalised word that is never part of a name (the module's rules)."""
    folded = _folded(word)
    plain = folded[:-1] if folded.endswith("s") and len(folded) > 3 else folded
    return (folded in STOP_WORDS or folded.split("'")[0] in ("i",) or folded.rstrip(".") in _CALENDAR
            or plain in _CALENDAR or folded in COMMON_ABBREVIATIONS or plain in COMMON_ABBREVIATIONS)


def _alone_not_a_name(word: str) -> bool:
    """A word that is a name only with others: a relation, a roman numeral, a word with a digit, a
    title, a head word ("the Hospital")."""
    folded = _folded(word).rstrip(".")
    return (english_relation_word(word) or _ROMAN.fullmatch(word) is not None or any(char.isdigit() for char in word)
            or folded in _TITLES or folded in _ORGANISATION_HEADS or folded in _PLACE_HEADS)


def _says_nothing_about_case(sentence: str) -> bool:
    """A sentence in capitals or title case: every word of four letters or more capitalised (three at
    least), and a function word after the first capitalised too ("Was", "THIS"; not "I")."""
    words = _TOKEN.findall(sentence)
    long_words = [word for word in words if len(word) >= 4 and word.isalpha()]
    return (len(long_words) >= 3 and all(word[0].isupper() for word in long_words)
            and any(word[0].isupper() and _folded(word) in STOP_WORDS and word != "I" for word in words[1:]))


def _opens_a_name(text: str, tokens: list[re.Match[str]], index: int) -> bool:
    """Whether `tokens[index]` may begin a name: a capitalised word that is not `_not_a_name_word`,
    or, inside a sentence, a capitalised function word before one ("Under Armour", "The Beatles")."""
    word = tokens[index].group()
    if not _capitalised(word):
        return False
    if not _not_a_name_word(word):
        return True
    return (_folded(word) in _NAME_FUNCTION_WORDS and index + 1 < len(tokens)
            and text[tokens[index].end():tokens[index + 1].start()] == " "
            and _capitalised(tokens[index + 1].group()) and not _not_a_name_word(tokens[index + 1].group())
            and not _sentence_start(text, tokens[index].start()))


def _short_form_pair(run: list[re.Match[str]]) -> bool:
    """Whether a run holds a name and its short form side by side ("call Melanie Mel"): two names."""
    words = [_folded(token.group()) for token in run]
    return any(a != b and len(a) >= 3 and b.startswith(a) for a in words for b in words)


def _runs(text: str) -> list[list[re.Match[str]]]:
    """The runs of capitalised words of `text`, with the lower-case connectors between them; a run
    of a name and its short form is two runs."""
    tokens = list(_TOKEN.finditer(text))
    runs: list[list[re.Match[str]]] = []
    index = 0
    while index < len(tokens):
        if not _opens_a_name(text, tokens, index):
            index += 1
            continue
        run = [tokens[index]]
        while True:
            following = _joined(text, tokens, index + 1, run[-1])
            if not following:
                break
            run += following
            index += len(following)
        runs += [[token] for token in run] if _short_form_pair(run) else [run]
        index += 1
    return runs


def _joined(text: str, tokens: list[re.Match[str]], start: int, last: re.Match[str]) -> list[re.Match[str]]:
    """The connectors and the capitalised word that continue a run after `last` (at `tokens[start]`), or []."""
    taken: list[re.Match[str]] = []
    previous = last
    for token in tokens[start:start + 3]:
        gap = text[previous.end():token.start()]
        dotted = gap.startswith(".") and gap[1:].isspace() and (
            _INITIALS.fullmatch(previous.group()) is not None or _folded(previous.group()) in _TITLES)
        if not (gap.isspace() or dotted) or "\n" in gap:
            return []
        word = token.group()
        if (word in _CONNECTORS or (_capitalised(word) and _folded(word) in _NAME_FUNCTION_WORDS)) and len(taken) < 2:
            taken.append(token)
            previous = token
            continue
        if _capitalised(word) and not _not_a_name_word(word):
            return [*taken, token]
        return []
    return []


def _before(text: str, start: int) -> str:
    return text[max(0, start - _LOOKBACK):start]


def _sentence_start(text: str, start: int) -> bool:
    before = _before(text, start)
    if before.rstrip() and _CJK.match(before.rstrip()[-1]):
        return False  # a Latin word written among Chinese characters
    return _SENTENCE_END.search(before) is not None


def _glued_capitals(text: str, token: re.Match[str]) -> bool:
    """A word in capitals only written against a Chinese character before it: part of a Chinese name or
    an abbreviation (秦PLUS DM-i, UI设计师), not a name of its own; a brand is written mixed (用Figma)."""
    word = token.group()
    return (token.start() > 0 and _CJK.match(text[token.start() - 1]) is not None
            and word.upper() == word and sum(char.isalpha() for char in word) >= 2)


def _opener(word: str, quoted: bool) -> bool:
    folded = _folded(word)
    return not quoted and (folded in _OPENERS or folded.endswith("ly")
                           or (folded.endswith("ing") and len(folded) > 5))


def _sentences(text: str) -> list[tuple[int, int]]:
    """The spans of `text`'s sentences that say nothing about case (`_says_nothing_about_case`)."""
    return [found.span() for found in re.finditer(r"[^.!?\n]+[.!?\n]*", text)
            if _says_nothing_about_case(found.group())]


def _inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether `position` is inside one of `spans` (sorted, not overlapping)."""
    index = bisect.bisect_right(spans, (position, len(spans) + position + 1)) - 1
    return index >= 0 and spans[index][0] <= position < spans[index][1]


def _kind(words: list[str], before: str) -> EntityKind:
    heads = {_folded(words[-1]).rstrip(".")}
    if len(words) > 1:  # Lake Tahoe, Mount Fuji; University of Leeds, Bank of America
        heads.add(_folded(words[0]).rstrip("."))
    if heads & _ORGANISATION_HEADS:
        return EntityKind.ORGANIZATION
    if heads & _PLACE_HEADS:
        return EntityKind.PLACE
    return kind_said_before(before) or EntityKind.UNKNOWN


def _judged(text: str, run: list[re.Match[str]]) -> CasedName | None:
    """The name a run of capitalised words is, by the module's rules, or None."""
    if _glued_capitals(text, run[0]):
        return None
    quoted = _OPEN_QUOTE.search(_before(text, run[0].start())) is not None
    at_start = quoted or _sentence_start(text, run[0].start())
    while run and (_folded(run[0].group()) in _OPENERS or (at_start and len(run) > 1 and _opener(run[0].group(),
                                                                                                  quoted))):
        run = run[1:]
        while run and run[0].group() in _CONNECTORS:
            run = run[1:]
        at_start = False
    if not run or len(run) > MAX_WORDS:
        return None
    first, kind = run[0].group(), None
    if len(run) == 1 and at_start and not any(c.isupper() for c in first[1:]):
        coordinated = _COORDINATED.match(text, run[0].end())  # "Luna and Oliver!", "Anthony and I went"
        if coordinated is None:
            return None
        kind = EntityKind.PERSON if coordinated.group("me") else None
    if len(run) == 1 and _alone_not_a_name(first):
        return None
    name = re.sub(r"['’]s?$", "", text[run[0].start():run[-1].end()])
    if name.lower().startswith(_ARTICLES) and len(run) > 1:  # "The Beatles": the name is Beatles
        name = name.split(" ", 1)[1]
    if len(name.replace(".", "").replace(" ", "")) < 2:
        return None
    return CasedName(name, run[0].start(), kind or _kind([m.group() for m in run], _before(text, run[0].start())))


def _quoted_titles(text: str) -> list[CasedName]:
    """Titles written in quotes in title case ("A Dance with Dragons", "Home Alone"): at most
    `MAX_WORDS` words, each capitalised but for function words, two or more capitalised."""
    found = []
    for quote in _QUOTED.finditer(text):
        words = quote.group(1).strip(" .,!?").split(" ")
        capitals = [word for word in words if word and _capitalised(word)]
        if (2 <= len(words) <= MAX_WORDS and len(capitals) >= 2 and words[0] in capitals
                and all(word in capitals or _folded(word) in STOP_WORDS for word in words)):
            found.append(CasedName(re.sub(r"['’]s?$", "", " ".join(words)), quote.start(1), EntityKind.UNKNOWN))
    return found


def cased_names(text: str) -> list[CasedName]:
    """The names `text` writes as proper names, in text order, each once (the module's rules).
    Raises TypeError for a text that is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = _ESCAPES.sub("\n ", text)  # a written "\\n" is a line break, not the word "nB" of "\\nB:"
    if not any(char.isupper() for char in re.sub(r"\bI\b", " ", text)):
        return []
    silent = _sentences(text)
    found = {title.name.casefold(): title for title in _quoted_titles(text)}
    quoted = [(title.start, title.start + len(title.name)) for title in found.values()]
    for run in _runs(text):
        if _inside(silent, run[0].start()) or _inside(quoted, run[0].start()):
            continue
        name = _judged(text, run)
        if name is not None:
            found.setdefault(name.name.casefold(), name)
    # a word of a longer name the message writes is that name's short form, or not a name ("Potter places")
    words = {word.casefold() for key in found for word in key.split()[1:] + key.split()[:1] if " " in key}
    return [name for key, name in found.items() if " " in key or key not in words]
