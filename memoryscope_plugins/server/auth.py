"""API keys: stored as SHA-256 hashes, each bound to a tenant, optionally to users, optionally admin.

A `KeyRing` loaded from a file follows that file: every lookup checks (at most once a second, with one
``stat``) whether the file changed (mtime, size or inode) and reloads it, so a key removed from the file, by
``serve --revoke-key`` or by hand, stops working on every running instance within about a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, ValidationError
from ..safe_write import open_for_writing
from ..validation import check_tenant

KEY_PREFIX = "msk_"
RELOAD_EVERY_S = 1.0
log = logging.getLogger(__name__)


def valid_tenant(tenant: object) -> bool:
    """A tenant name follows `validation.TENANT_RULE` (the whole string: no trailing newline, not '.' or '..')."""
    try:
        check_tenant(tenant)
    except ValidationError:
        return False
    return True


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically with mode 0600 whatever the umask (a stricter existing mode is kept).

    By export's rules (`safe_write`): a symbolic link is written through (its target replaced, the
    link kept); a folder, device, FIFO or socket, or an invalid path, is a `ValidationError`."""
    with contextlib.suppress(OSError, ValueError):  # an invalid path is reported below, as ours
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o600 or 0o600  # stat follows a link: the target's mode
    except (OSError, ValueError):
        mode = 0o600
    with open_for_writing(path, what="key file", streams=False, mode=mode) as handle:
        handle.write(text)


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


def _parse(text: str) -> list[ApiKey]:
    """The keys of a key file's text; a `ValueError` saying what is wrong when it is not a key ring."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('not a key ring (an object whose "keys" is a list)')
    return [_entry(number, item) for number, item in enumerate(data["keys"], 1)]


def _entry(number: int, item: object) -> ApiKey:
    where = f"key entry {number}"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object")
    for name in ("key_hash", "tenant"):
        if not isinstance(item.get(name), str) or not item[name]:
            raise ValueError(f'{where} has no "{name}" string')
    users = item.get("users") or []
    if not isinstance(users, list) or not all(isinstance(user, str) for user in users):
        raise ValueError(f'{where}: "users" must be a list of user ids')
    admin = item.get("admin") or False
    if not isinstance(admin, bool):  # a string such as "false" must not read as admin
        raise ValueError(f'{where}: "admin" must be true or false')
    name = item.get("name") or ""
    if not isinstance(name, str):
        raise ValueError(f'{where}: "name" must be a string')
    return ApiKey(key_hash=item["key_hash"], tenant=item["tenant"], users=tuple(users), admin=admin, name=name)


def _read(file: Path) -> list[ApiKey]:
    """The keys in `file`: `OSError` when it cannot be read, `ValueError` when it is not a key ring."""
    data = file.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    return _parse(text)


def _signature(file: Path) -> tuple[int, int, int] | None:
    try:
        info = file.stat()
    except FileNotFoundError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass
class KeyRing:
    """The set of known keys (hashes only), loaded from and saved to a JSON file.

    A ring from `load` follows its file (see the module docstring); a ring built in code does not."""

    keys: list[ApiKey] = field(default_factory=list)
    path: Path | None = None
    _signature: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)
    _checked: float = field(default=0.0, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyRing:
        """The ring of the key file `path` (no keys when there is no such file, as on a first start); a
        file that cannot be read or is not a key ring is a `ConfigError` saying why."""
        file = Path(path)
        try:
            signature = _signature(file)
            if signature is None:
                return cls(path=file)
            keys = _read(file)
        except OSError as exc:
            raise ConfigError(f"cannot read the key file {file}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"cannot read the key file {file}: {exc}") from None
        return cls(keys, path=file, _signature=signature, _checked=time.monotonic())

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write the ring (hashes only) atomically, mode 0600 whatever the umask."""
        file = Path(path) if path is not None else self.path
        if file is None:
            raise ValueError("save needs a path for a ring not loaded from a file")
        write_private(file, json.dumps({"keys": [k.to_dict() for k in self.keys]}, indent=1))
        if file == self.path:
            self._signature = _signature(file)

    def create(self, tenant: str, *, users: tuple[str, ...] = (), admin: bool = False, name: str = "") -> str:
        """Add a new key and return it in clear (the only time it is ever visible)."""
        if not valid_tenant(tenant):
            raise ValidationError("tenant must be 1-64 characters of letters, digits, '_', '-' or '.'")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        self.keys.append(ApiKey(hash_key(key), tenant, tuple(users), admin, name))
        return key

    def revoke(self, which: str) -> list[ApiKey]:
        """Remove the key given in clear, by its full hash, or by a unique hash prefix of 8+ characters;
        returns what was removed (nothing when `which` matches no key or several)."""
        which = which.strip()
        if which.startswith(KEY_PREFIX):
            matches = [k for k in self.keys if hmac.compare_digest(k.key_hash, hash_key(which))]
        elif len(which) >= 8:
            matches = [k for k in self.keys if k.key_hash.startswith(which.lower())]
        else:
            matches = []
        if len(matches) != 1:
            return []
        self.keys = [k for k in self.keys if k.key_hash != matches[0].key_hash]
        return matches

    def refresh(self, *, force: bool = False) -> None:
        """Reload the file if it changed since the last look (looks at most once per RELOAD_EVERY_S).
        A missing file means no keys; an unreadable one keeps the keys in force and is retried."""
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._checked < RELOAD_EVERY_S:
            return
        with self._lock:
            if not force and now - self._checked < RELOAD_EVERY_S:
                return
            self._checked = now
            signature = _signature(self.path)
            if signature == self._signature:
                return
            if signature is None:
                self.keys, self._signature = [], None
                return
            try:
                self.keys = _read(self.path)
            except (OSError, ValueError) as exc:
                log.warning("the key file could not be read (%s); the keys loaded before stay in force",
                            type(exc).__name__)
                return
            self._signature = signature

    def lookup(self, key: str | None) -> ApiKey | None:
        self.refresh()
        if not key:
            return None
        digest = hash_key(key)
        found = None
        for item in self.keys:  # compare every entry in constant time
            if hmac.compare_digest(item.key_hash, digest):
                found = item
        return found


class RateLimiter:
    """A token bucket per key (or per client address): `rate` per second with bursts of `burst` (per
    instance). Memory is bounded: past `max_tracked` buckets, full ones are forgotten, then the least
    recently used."""

    def __init__(self, rate: float, burst: int, *, max_tracked: int = 10_000) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.max_tracked = max_tracked
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, who: str) -> bool:
        return self.take(who) == 0.0

    def take(self, who: str) -> float:
        """Take a token: 0.0 when there was one, else the seconds until there will be (nothing is taken)."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens = self._level(who, now)
            self._buckets.pop(who, None)  # re-inserted below: the dict's order is least recently used first
            if tokens < 1.0:
                self._buckets[who] = (tokens, now)
                return (1.0 - tokens) / self.rate
            self._buckets[who] = (tokens - 1.0, now)
            if len(self._buckets) > self.max_tracked:
                self._forget_full(now)
                while len(self._buckets) > self.max_tracked:
                    del self._buckets[next(iter(self._buckets))]
            return 0.0

    def wait(self, who: str) -> float:
        """Seconds until `who` has a token again (0.0: has one now); takes nothing."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            tokens = self._level(who, time.monotonic())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def _level(self, who: str, now: float) -> float:
        tokens, last = self._buckets.get(who, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - last) * self.rate)

    def _forget_full(self, now: float) -> None:
        for who in [w for w in self._buckets if self._level(w, now) >= self.burst]:
            del self._buckets[who]
