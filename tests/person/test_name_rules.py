"""What an entity name, an alias and a profile key may hold (`person.name_rules`): one rule by Unicode
category, one length limit, one message per rule; and the ledger drops what the rule refuses."""

from __future__ import annotations

from typing import Any

import pytest

from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.person import ProposedEntity, plan_new_entities, rename
from memoryscope_plugins.person.name_rules import canonical_key, check_name, check_new_name
from tests.person.helpers import T0, entity

# (value, the whole message for a field called "alias")
REFUSED: list[tuple[Any, str]] = [
    (5, "alias must be a string, not int"),
    (None, "alias must be a string, not NoneType"),
    ("", "alias must not be empty"),
    ("   ", "alias must not be empty"),
    ("x" * 300, "alias has 300 characters; a name or key is at most 80"),
    ("x" * 81, "alias has 81 characters; a name or key is at most 80"),
    ("Mel\u202eina", "alias holds U+202E, a format character (Unicode Cf); a name or key holds no control, "
                     "format, surrogate, private-use or unassigned character"),
    ("Me\u200bl", "alias holds U+200B, a format character (Unicode Cf)"),
    ("Mel\n", "alias holds U+000A, a control character (Unicode Cc)"),
    ("Mel\tB", "alias holds U+0009, a control character (Unicode Cc)"),
    ("Mel\ue000", "alias holds U+E000, a private-use character (Unicode Co)"),
    ("Mel\u0378", "alias holds U+0378, an unassigned code point (Unicode Cn)"),
    ("Mel\ud800", "alias holds U+D800, a surrogate (Unicode Cs)"),
    ("Mel\u2028B", "alias holds U+2028, a line separator (Unicode Zl)"),
    (" Mel", "alias begins or ends with white space"),
    ("Mel\u3000", "alias begins or ends with white space"),
]
NOT_NAMES: list[tuple[Any, str]] = [
    ("🐱🐱", "alias holds fewer than 2 letters or digits; emoji, symbols and punctuation do not count "
             "(a name is matched on its letters)"),
    ("C++", "alias holds fewer than 2 letters or digits"),
    ("J.", "alias holds fewer than 2 letters or digits"),
    ("it", "alias is a function word or pronoun in lower case ('it', 'will', '我们'), which would match everywhere"),
    ("我们", "alias is a function word or pronoun in lower case"),
]


@pytest.mark.parametrize("value, message", REFUSED + NOT_NAMES)
def test_a_new_name_breaking_a_rule_gets_that_rules_message(value, message):
    with pytest.raises(ValidationError) as caught:
        check_new_name(value, "alias")
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("value, message", REFUSED)
def test_a_looked_up_name_and_a_key_follow_the_same_character_and_length_rules(value, message):
    with pytest.raises(ValidationError) as caught:
        check_name(value, "other")
    assert str(caught.value).startswith(message.replace("alias", "other", 1))
    with pytest.raises(ValidationError) as caught:
        canonical_key(value, "key")
    assert str(caught.value).startswith(message.replace("alias", "key", 1))


@pytest.mark.parametrize("value, stored", [
    ("Mel", "Mel"), ("Will", "Will"), ("AC/DC", "AC/DC"), ("O'Brien", "O'Brien"), ("王磊", "王磊"),
    ("Mel ☕", "Mel ☕"), ("Mel  Anne", "Mel Anne"), ("Zoë", "Zoë"), ("Ngũgĩ", "Ngũgĩ"), ("x" * 80, "x" * 80),
    ("50% off?", "50% off?"),
])
def test_names_in_any_script_with_symbols_inside_are_kept(value, stored):
    assert check_new_name(value, "alias") == stored
    assert check_name(value, "name") == value


def test_a_lookup_takes_what_is_not_a_new_name_but_may_be_held():
    assert check_name("it", "name") == "it"  # no entity is called so: not found, not a rule broken
    assert check_name("🐱🐱", "name") == "🐱🐱"
    assert check_name("3ba6be6aab00556a94f45a68b2b5b684", "name")  # an entity id


@pytest.mark.parametrize("key, canonical", [("home", "home"), ("Lives in", "home"), ("住址", "home"),
                                            ("家", "home"), ("favourite food", "favourite_food")])
def test_a_key_is_answered_as_its_canonical_key(key, canonical):
    assert canonical_key(key, "key") == canonical


def test_a_key_with_no_letter_or_digit_is_refused():
    with pytest.raises(ValidationError, match=r"^key holds no letter or digit$"):
        canonical_key("!!!", "key")
    with pytest.raises(ValidationError, match=r"^key holds no letter or digit$"):
        canonical_key("🐱", "key")


def test_rename_in_the_person_module_says_the_same():
    with pytest.raises(ValueError, match=r"^new_name holds U\+202E, a format character"):
        rename(entity("e1", "Mel"), "Mel\u202eina")
    with pytest.raises(ValueError, match=r"^new_name holds fewer than 2 letters or digits"):
        rename(entity("e1", "Mel"), "🐱🐱")


def test_the_ledger_never_adds_a_name_the_rule_refuses():
    text = "Eve\u202eevil and Ana\u200bstasia came by with Bob."
    proposals = [ProposedEntity(name="Eve\u202eevil", kind="person", message_index=0),
                 ProposedEntity(name="Ana\u200bstasia", kind="person", message_index=0),
                 ProposedEntity(name="Bob", kind="person", message_index=0)]
    changes, _ = plan_new_entities("u", [], proposals, [text], now=T0)
    assert [e.name for e in changes] == ["Bob"]
    speakers = ["Ro\u202ese", " Ann  Lee "]  # as the engine proposes a conversation's speakers: whitespace is cleaned
    proposed = [ProposedEntity(name, "person", None, index) for index, name in enumerate(speakers)]
    changes, _ = plan_new_entities("u", [], proposed, speakers, now=T0)
    assert [e.name for e in changes] == ["Ann Lee"]
