"""How the server names a tenant's user in the shared store, and the move from the old layout.

A tenant's user lives in the store as ``"<tenant>:<user>"``. Tenant names are a strict slug
(`validation.TENANT_RULE`: letters, digits, ``_ - .``), so they never contain ``:``, and the user
part follows the identifier rule (`validation.ID_RULE`) by itself, before the prefix is added: a
blank user id stays blank, whatever the tenant. A key of one tenant therefore can never name
another tenant's user.

Before the identifier rule the layout was ``"<tenant>/<user>"``, which the rule now forbids.
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


def store_user_id(tenant: str, user: str) -> str:
    """The store's id for `user` of `tenant`; `ValidationError` when either breaks its rule."""
    check_tenant(tenant)
    check_id(user, "user id")
    if len(tenant) + len(SEPARATOR) + len(user) > MAX_ID_CHARS:
        raise ValidationError(f"user id is longer than {MAX_ID_CHARS - len(tenant) - len(SEPARATOR)} characters "
                              "(for this tenant)")
    return f"{tenant}{SEPARATOR}{user}"


def public_user_id(store_id: str, tenant: str) -> str | None:
    """The user part of a store id when it belongs to `tenant` (new layout only), else None."""
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
    renamed: int = 0  # users moved from "<tenant>/<user>" to "<tenant>:<user>"
    left: int = 0  # legacy users that could not be moved (their user part breaks the rule, or the new id is taken)


def legacy_target(store_id: str) -> str | None:
    """The new-layout id for an old-layout ``"<tenant>/<user>"`` id, or None when it is not one
    (or its user part breaks the identifier rule: then it stays for an admin to clean up)."""
    tenant, sep, user = store_id.partition(LEGACY_SEPARATOR)
    if not sep or not TENANT_PATTERN.fullmatch(tenant) or tenant in (".", ".."):
        return None
    target = f"{tenant}{SEPARATOR}{user}"
    return target if is_safe_id(user) and is_safe_id(target) else None


def migrate_legacy_users(engine) -> MigrationReport:
    """Rename every ``"<tenant>/<user>"`` user of the store to ``"<tenant>:<user>"`` (memories,
    vectors, pending messages and memory ids kept; one transaction per user). Idempotent, and safe
    to run from several instances at once: a user another instance moved first is skipped. Logs
    counts only, never ids."""
    report = MigrationReport()
    present = set(engine.users())
    for old in sorted(present):
        if is_safe_id(old):
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
        log.warning("identifier migration: %d user(s) renamed to the <tenant>:<user> layout, %d legacy "
                    "user(s) left (MemoryScope.legacy_users lists them; see docs/server.md)",
                    report.renamed, report.left)
    return report
