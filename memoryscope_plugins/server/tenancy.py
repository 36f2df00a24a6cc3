"""How the server names a tenant's user in the shared store, and the moves from older layouts.

The tenant ``default`` (the one the first ``serve`` start makes an admin key for, and ``serve --stdio``'s)
is the store's own users: its ``anna`` is the store's ``anna``, the user the Python API and the command
line (``record``, ``list anna``, ``users``) read and write, so a person who starts the server on the
memories they already have sees them. Every other tenant's user lives in the store as
``"<tenant>:<user>"``. Tenant names are a strict slug (`validation.TENANT_RULE`: letters, digits,
``_ - .``), so they never contain ``:``, and a ``default`` user may not contain ``:`` either: no key can
name a user of another tenant, whichever tenant it belongs to. The user part follows the identifier
rule (`validation.ID_RULE`) by itself, before any prefix is added: a blank user id stays blank, whatever
the tenant.

Older layouts: before the identifier rule a tenant's user was ``"<tenant>/<user>"`` (which the rule now
forbids), and for a while the default tenant's was ``"default:<user>"`` like any other tenant's.
`migrate_legacy_users` renames such users once, when the server starts (see docs/server.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import ValidationError
from ..validation import MAX_ID_CHARS, TENANT_PATTERN, check_id, check_tenant, is_safe_id

log = logging.getLogger(__name__)
SEPARATOR = ":"
LEGACY_SEPARATOR = "/"


DEFAULT_TENANT = "default"


def store_user_id(tenant: str, user: str) -> str:
    """The store's id for `user` of `tenant`: `user` itself for the default tenant, else
    ``"<tenant>:<user>"``; `ValidationError` when either breaks its rule."""
    check_tenant(tenant)
    check_id(user, "user id")
    if tenant == DEFAULT_TENANT:
        if SEPARATOR in user:
            raise ValidationError(f"a user id of the {DEFAULT_TENANT!r} tenant cannot contain {SEPARATOR!r} "
                                  "(it separates another tenant's name from its users)")
        return user
    if len(tenant) + len(SEPARATOR) + len(user) > MAX_ID_CHARS:
        raise ValidationError(f"user id is longer than {MAX_ID_CHARS - len(tenant) - len(SEPARATOR)} characters "
                              "(for this tenant)")
    return f"{tenant}{SEPARATOR}{user}"


def tenant_team(tenant: str) -> str:
    """The team whose agents' procedures a tenant's users teach (`procedures.scope.team_of` of its store
    ids): "" for the default tenant (its users hold no ':'), else the tenant's name."""
    check_tenant(tenant)
    return "" if tenant == DEFAULT_TENANT else tenant


def public_user_id(store_id: str, tenant: str) -> str | None:
    """The user part of a store id when it belongs to `tenant` (current layout only), else None."""
    if tenant == DEFAULT_TENANT:
        return store_id if SEPARATOR not in store_id and is_safe_id(store_id) else None
    prefix = tenant + SEPARATOR
    return store_id[len(prefix):] if store_id.startswith(prefix) else None


def strip_tenant(text: str, tenant: str) -> str:
    """A speaker label without the tenant prefix (default speakers are the store's user id)."""
    for prefix in (tenant + SEPARATOR, tenant + LEGACY_SEPARATOR):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


@dataclass
class MigrationReport:
    renamed: int = 0  # users moved from an older layout to the current one
    left: int = 0  # users of an older layout that could not be moved (their user part breaks the rule, or the new
    # id is taken)


def legacy_target(store_id: str) -> str | None:
    """The current id of a user stored in an older layout (``"<tenant>/<user>"``, or
    ``"default:<user>"``), or None when `store_id` is in neither, or its user part cannot be moved (it
    breaks the identifier rule, or a ``default`` user holds ``:``): then it stays for an admin to clean up."""
    tenant, sep, user = store_id.partition(LEGACY_SEPARATOR)
    if not sep:
        tenant, sep, user = store_id.partition(SEPARATOR)
        if not sep or tenant != DEFAULT_TENANT:
            return None
    if not TENANT_PATTERN.fullmatch(tenant) or tenant in (".", ".."):
        return None
    try:
        return store_user_id(tenant, user)
    except ValidationError:
        return None


def _in_older_layout(store_id: str) -> bool:
    return not is_safe_id(store_id) or store_id.startswith(DEFAULT_TENANT + SEPARATOR)


def migrate_legacy_users(engine) -> MigrationReport:
    """Rename every user stored in an older layout to its current id (``"<tenant>/<user>"`` to
    ``"<tenant>:<user>"``; ``"default/<user>"`` and ``"default:<user>"`` to ``"<user>"``), memories,
    vectors, pending messages and memory ids kept, one transaction per user. Idempotent, and safe to run
    from several instances at once: a user another instance moved first is skipped. A user whose new id
    is already taken (``default:anna`` beside an ``anna`` written by the command line) is left as it is:
    never merged. Logs counts only, never ids."""
    report = MigrationReport()
    present = set(engine.users())
    for old in sorted(present):
        if not _in_older_layout(old):
            continue
        target = legacy_target(old)
        if target is None or target in present:
            report.left += 1
            continue
        try:
            engine.rename_user(old, target)
            report.renamed += 1
        except ValidationError:  # being consolidated, or moved meanwhile by another instance
            report.left += 1
    if report.renamed or report.left:
        log.warning("identifier migration: %d user(s) renamed to the current layout, %d user(s) of an older "
                    "layout left (MemoryScope.users and legacy_users list them; see docs/server.md)",
                    report.renamed, report.left)
    return report
