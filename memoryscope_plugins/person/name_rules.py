"""What an entity name, an alias and a profile key may hold: one rule, one message per rule, for
every surface (the engine, HTTP, MCP, the CLI, the adapters' tools). Each surface calls these with
the field's name as its caller spells it ("alias", "name", "--history"), so the message names it.

The rules, in the order they are checked (the first broken one is the message):

1. a string (`must be a string, not int`);
2. not empty or blank;
3. at most `MAX_NAME_CHARS` (80) characters, as written;
4. no character a reader cannot see or trust: Unicode categories Cc (control: NUL, tab, CR, LF),
   Cf (format: bidi overrides such as U+202E, zero-width spaces and joiners, the BOM), Cs (lone
   surrogates), Co (private use), Cn (unassigned in the running Python's Unicode version), Zl and
   Zp (line and paragraph separators). A name holding U+202E displays as another name; a key
   holding LF would be folded into another key;
5. no white space at either end (" home" is not silently "home").

A name or alias that is *written* (a rename, a new alias) must also be one the ledger can match:

6. at least 2 letters or digits. Emoji, symbols and punctuation may stand in a name ("Mel ☕",
   "AC/DC") but do not count: a message is matched on its letters, so "🐱🐱" could never be found;
7. not a function word or pronoun in lower case ("it", "will", "我们": it would match everywhere;
   the capitalised "Will" is a name).

A profile key must hold a letter or a digit; it is then stored under its canonical key
(`profile.normalise_key`: lower_snake, synonyms folded, so "Lives in" and "住址" are "home"), which
every answer names. Looking an entity up takes rules 1-5 (a name, an alias or an entity id).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ..errors import ValidationError
from .matching import MAX_NAME_CHARS, normalise_name, usable_name
from .profile import normalise_key

#: the Unicode categories no name or key may hold, with the word a message uses for each
REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "a format character", "Cs": "a surrogate",
                      "Co": "a private-use character", "Cn": "an unassigned code point",
                      "Zl": "a line separator", "Zp": "a paragraph separator"}
#: what rule 4 says, as its message ends
CHARACTER_RULE = "a name or key holds no control, format, surrogate, private-use or unassigned character"


def holds_problem(value: Any) -> str | None:
    """Why `value` cannot be a name, an alias or a key by rules 1-5 (a phrase that follows the
    field's name), or None when it can."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value.strip():
        return "must not be empty"
    if len(value) > MAX_NAME_CHARS:
        return f"has {len(value)} characters; a name or key is at most {MAX_NAME_CHARS}"
    for char in value:
        category = unicodedata.category(char)
        if category in REFUSED_CATEGORIES:
            return f"holds U+{ord(char):04X}, {REFUSED_CATEGORIES[category]} (Unicode {category}); {CHARACTER_RULE}"
    if value != value.strip():
        return "begins or ends with white space"
    return None


def letters_and_digits(value: str) -> int:
    """How many letters and digits `value` holds as names are compared (`normalise_name` keeps
    them, NFKC applied): what a match is made of. Emoji, symbols, punctuation and spaces do not count."""
    return len(normalise_name(value).replace(" ", ""))


def new_name_problem(value: Any) -> str | None:
    """Why `value` cannot be written as an entity's name or alias (rules 1-7), or None."""
    problem = holds_problem(value)
    if problem is not None:
        return problem
    if letters_and_digits(value) < 2:
        return ("holds fewer than 2 letters or digits; emoji, symbols and punctuation do not count "
                "(a name is matched on its letters)")
    if not usable_name(value):
        return "is a function word or pronoun in lower case ('it', 'will', '我们'), which would match everywhere"
    return None


def check_name(value: Any, what: str) -> str:
    """A name, an alias or an entity id to look an entity up by (rules 1-5); `ValidationError`
    naming `what` otherwise."""
    problem = holds_problem(value)
    if problem is not None:
        raise ValidationError(f"{what} {problem}")
    return value


def check_new_name(value: Any, what: str) -> str:
    """A new name or alias for an entity (rules 1-7), its inner runs of spaces made one;
    `ValidationError` naming `what` otherwise."""
    problem = new_name_problem(value)
    if problem is not None:
        raise ValidationError(f"{what} {problem}")
    return " ".join(value.split())


def canonical_key(value: Any, what: str) -> str:
    """The canonical profile key `value` names ("住址" -> "home"), after rules 1-5 and "holds a
    letter or a digit"; `ValidationError` naming `what` otherwise."""
    problem = holds_problem(value)
    if problem is None and letters_and_digits(value) == 0:
        problem = "holds no letter or digit"
    if problem is not None:
        raise ValidationError(f"{what} {problem}")
    try:
        return normalise_key(value)
    except ValueError as exc:
        raise ValidationError(f"{what}: {exc}") from None
