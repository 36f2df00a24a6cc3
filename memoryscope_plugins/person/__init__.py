"""The person behind the memories: the entity ledger's and the profile's rules, without a store or a model.

Pure functions over the records of `types` (`Entity`, `EntityMention`, `ProfileValue`) and
`storage.base.LedgerChanges`, shared by consolidation (new entities, profile proposals), the engine
(merge, rename, ranking, timeline, corrections) and retrieval (names in a text, questions about an
entity, the profile lines of the context block):

- `matching`: `normalise_name` and `NameMatcher` (the known names in a text, English and Chinese);
- `ledger`: `record_mentions`, `plan_entities` (and `plan_new_entities`), `merge`, `rename`, `rank`, `timeline`;
- `record_names` (with `cased_names`, `dictionary_names`): the names a message writes, found by
  `record` without a model;
- `profile`: `normalise_key`, `apply`, `set_by_user`, `retract`, `current`, `history`, `profile_lines`;
- `questions`: `entity_question`;
- `name_rules`: what an entity name, an alias and a profile key may hold (`check_name`,
  `check_new_name`, `canonical_key`), the one rule every surface checks.

Each module's docstring states its rules.
"""

from .ledger import (
    EntityPlan,
    ProposedEntity,
    entity_kind,
    merge,
    plan_entities,
    plan_new_entities,
    rank,
    record_mentions,
    rename,
    timeline,
)
from .matching import NameMatch, NameMatcher, normalise_name
from .profile import (
    MULTI_VALUED,
    SINGLE_VALUED,
    ProfileProposal,
    apply,
    current,
    history,
    is_multi_valued,
    normalise_key,
    profile_lines,
    retract,
    set_by_user,
)
from .questions import entity_question

__all__ = [
    "EntityPlan",
    "MULTI_VALUED",
    "NameMatch",
    "NameMatcher",
    "ProfileProposal",
    "ProposedEntity",
    "SINGLE_VALUED",
    "apply",
    "current",
    "entity_kind",
    "entity_question",
    "history",
    "is_multi_valued",
    "merge",
    "normalise_key",
    "normalise_name",
    "plan_entities",
    "plan_new_entities",
    "profile_lines",
    "rank",
    "record_mentions",
    "rename",
    "retract",
    "set_by_user",
    "timeline",
]
