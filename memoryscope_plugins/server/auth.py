"""API keys: stored as SHA-256 hashes, each bound to a tenant, optionally to users, optionally admin."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ValidationError

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
KEY_PREFIX = "msk_"


def hash_key(key: str) -> str:
    """The at-rest form of a key (keys are long random tokens, so a plain SHA-256 is enough)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """What a key may do: its tenant, the users it may reach (empty: all of the tenant's), admin or not."""

    key_hash: str
    tenant: str
    users: tuple[str, ...] = ()
    admin: bool = False
    name: str = ""

    def may_reach(self, user_id: str) -> bool:
        return not self.users or user_id in self.users

    def to_dict(self) -> dict:
        return {"key_hash": self.key_hash, "tenant": self.tenant, "users": list(self.users),
                "admin": self.admin, "name": self.name}


@dataclass
class KeyRing:
    """The set of known keys (hashes only), loaded from and saved to a JSON file."""

    keys: list[ApiKey] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "KeyRing":
        file = Path(path)
        if not file.exists():
            return cls()
        data = json.loads(file.read_text(encoding="utf-8"))
        return cls([ApiKey(key_hash=k["key_hash"], tenant=k["tenant"], users=tuple(k.get("users") or ()),
                           admin=bool(k.get("admin")), name=k.get("name", "")) for k in data.get("keys", [])])

    def save(self, path: str | os.PathLike[str]) -> None:
        file = Path(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(file.suffix + ".tmp")
        tmp.write_text(json.dumps({"keys": [k.to_dict() for k in self.keys]}, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, file)

    def create(self, tenant: str, *, users: tuple[str, ...] = (), admin: bool = False, name: str = "") -> str:
        """Add a new key and return it in clear (the only time it is ever visible)."""
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            raise ValidationError("tenant must be 1-64 characters of letters, digits, '_', '-' or '.'")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        self.keys.append(ApiKey(hash_key(key), tenant, tuple(users), admin, name))
        return key

    def lookup(self, key: str | None) -> ApiKey | None:
        if not key:
            return None
        digest = hash_key(key)
        found = None
        for item in self.keys:  # compare every entry in constant time
            if hmac.compare_digest(item.key_hash, digest):
                found = item
        return found


class RateLimiter:
    """A token bucket per key: `rate` requests per second with bursts of `burst` (per instance)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, who: str) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(who, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[who] = (tokens, now)
                return False
            self._buckets[who] = (tokens - 1.0, now)
            return True
