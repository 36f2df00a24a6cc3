"""The user's profile kept current: short open-ended keys, each value with its evidence and history.
Pure functions over `ProfileValue` records: no store, no model.

The rules:

- Keys are open-ended and normalised (`normalise_key`): lower_snake, and the usual English and
  Chinese words for one thing folded to one key ("lives in", "住在", "住址", "家" -> home; "job",
  "工作", "职业", "职位" -> work; "宠物" -> pets; "饮食" -> diet; "喜欢" -> likes ...).
- Some keys hold one value at a time (name, age, home, work, diet, relationship ...: `SINGLE_VALUED`),
  others several (family, pets, likes, dislikes, plans ...: `MULTI_VALUED`). A key of neither list
  holds several when it reads as an English plural ("cars"), else one.
- A value repeated (compared normalised: "Leeds" and "leeds.") adds its source to the value that is
  true at that time instead of being stored twice.
- A new value of a single-valued key replaces the current one: the old value gets `valid_to` = the
  new value's `valid_from` and `superseded_by` = its id (history, not overwrite). Multi-valued keys
  accumulate. A value said *before* a value already known to start later (a late or out-of-order
  observation) does not replace it: it is stored as history, ending where its successor starts (and
  the value true until then ends where it starts).
- A user's correction (`set_by_user`) starts at the moment of the edit, so by the rule above a
  proposal said before the edit never replaces it; one said after it does.
- Nothing is deleted: every value proposed is kept, current or as history (`retract` only ends one).
"""

from __future__ import annotations

import dataclasses
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Iterable

from ..types import ProfileValue, as_aware, utc_now
from .matching import MAX_NAME_CHARS, normalise_name

#: The longest key kept, in characters (a longer one is a sentence, not a key): the limit of every
#: name and key (`name_rules`).
MAX_KEY_CHARS = MAX_NAME_CHARS
#: The longest value kept, in characters.
MAX_VALUE_CHARS = 200

_SYNONYMS: dict[str, str] = {
    "name": "full_name given_name first_name called 名字 姓名 名 称呼",
    "age": "years_old 年龄 岁数 年纪",
    "birthday": "date_of_birth birth_date dob born 生日 出生日期",
    "gender": "sex 性别",
    "nationality": "citizenship 国籍",
    "home": ("lives_in live_in lives living_in residence address home_city current_city city location "
             "where_lives 住在 家 住址 居住地 住处 地址 所在地 现居 居住城市 住"),
    "hometown": "home_town from origin birthplace place_of_birth grew_up_in 老家 家乡 籍贯 出生地",
    "work": ("job occupation profession employer workplace career position role job_title title works_at "
             "works_as 工作 职业 职位 工作单位 公司 单位 岗位"),
    "school": "education university college studies study major degree 学校 学历 大学 专业 教育 学业",
    "diet": "dietary diet_preference food_restrictions eating 饮食 忌口 饮食习惯",
    "relationship": "relationship_status marital_status partner spouse married 婚姻 婚姻状况 感情状况 恋爱 感情",
    "family": "family_members kids children child siblings parents 家人 家庭 孩子 子女 父母 兄弟姐妹 家庭成员",
    "pets": "pet 宠物",
    "likes": ("like loves love favorite favourite favorites favourites preferences preference enjoys "
              "喜欢 偏好 喜好 最爱"),
    "dislikes": "dislike hates hate 不喜欢 讨厌 厌恶",
    "hobbies": "hobby interests interest 爱好 兴趣 兴趣爱好",
    "plans": "plan goals goal upcoming intentions 计划 打算 目标 安排",
    "allergies": "allergy allergic_to 过敏",
    "languages": "language speaks 语言",
    "friends": "friend 朋友",
    "skills": "skill 技能",
}
_KEY_OF = {synonym: key for key, words in _SYNONYMS.items() for synonym in [key, *words.split()]}
_PREFIXES = ("the_user_s_", "user_s_", "user_", "my_", "current_", "用户的", "用户", "我的", "我")

#: Keys that hold one value at a time; a new value replaces the current one.
SINGLE_VALUED = frozenset({"name", "age", "birthday", "gender", "nationality", "home", "hometown", "work",
                           "school", "diet", "relationship"})
#: Keys that hold several values at once; new values accumulate.
MULTI_VALUED = frozenset({"family", "pets", "likes", "dislikes", "hobbies", "plans", "allergies", "languages",
                          "friends", "skills"})
_ORDER = [*_SYNONYMS]
_LABELS_ZH = {
    "name": "名字", "age": "年龄", "birthday": "生日", "gender": "性别", "nationality": "国籍", "home": "住址",
    "hometown": "家乡", "work": "工作", "school": "学校", "diet": "饮食", "relationship": "感情状况",
    "family": "家人", "pets": "宠物", "likes": "喜欢", "dislikes": "不喜欢", "hobbies": "爱好", "plans": "计划",
    "allergies": "过敏", "languages": "语言", "friends": "朋友", "skills": "技能",
}
_SENTENCE_END = ".。!！;；,，、 "


@dataclass(frozen=True, slots=True)
class ProfileProposal:
    """A profile value an observation states ("home" = "Leeds"), as consolidation proposes it: the
    key as written (normalised by `apply`), the value, the memory it rests on (`source_id`, or
    None), when it became true or was said (`at`) and the language it is written in ("en"/"zh")."""

    key: str
    value: str
    source_id: str | None
    at: datetime
    language: str = "en"


def _unprefixed(key: str) -> str:
    snake = normalise_name(key).replace(" ", "_")
    for prefix in _PREFIXES:
        if snake.startswith(prefix) and len(snake) > len(prefix) and snake not in _KEY_OF:
            return snake[len(prefix):]
    return snake


@lru_cache(maxsize=4096)
def _normalised_key(key: str) -> str:
    snake = _unprefixed(key)
    return _KEY_OF.get(snake, snake)


def normalise_key(key: str) -> str:
    """The key `key` is stored under: lower_snake, synonyms (English and Chinese) folded to one key
    ("Lives in" and "住址" -> "home", "职业" -> "work"). Raises TypeError for a non-str,
    ValueError for an empty key or one over `MAX_KEY_CHARS`."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    if len(key) > MAX_KEY_CHARS:
        raise ValueError(f"a profile key is at most {MAX_KEY_CHARS} characters")
    normalised = _normalised_key(key)
    if not normalised:
        raise ValueError("a profile key must hold a letter or a digit")
    if len(normalised) > MAX_KEY_CHARS:
        raise ValueError(f"a profile key is at most {MAX_KEY_CHARS} characters")
    return normalised


def is_multi_valued(key: str) -> bool:
    """Whether the (normalised) `key` holds several values at once (see the module's rules)."""
    key = normalise_key(key)
    if key in MULTI_VALUED or key in SINGLE_VALUED:
        return key in MULTI_VALUED
    return key.isascii() and key.endswith("s") and not key.endswith(("ss", "us", "is"))


def _clean_value(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    cleaned = " ".join(unicodedata.normalize("NFC", value).split()).strip(_SENTENCE_END)
    return cleaned if cleaned and len(cleaned) <= MAX_VALUE_CHARS and normalise_name(cleaned) else None


def names_its_key(key: str, value: str) -> bool:
    """Whether `value` only names its `key` ("family: family", "工作: 我的工作", "Family members:
    family members"): it says nothing about the user. A value that is another word of the key's
    ("relationship: married", "school: university") says something and is not refused."""
    try:
        canonical = normalise_key(key)
    except (TypeError, ValueError):
        return False
    said = _unprefixed(value)
    return said in (canonical, _unprefixed(key), _LABELS_ZH.get(canonical))


def _same(one: str, other: str) -> bool:
    return normalise_name(one) == normalise_name(other)


def _start(value: ProfileValue) -> datetime:
    return as_aware(value.valid_from or value.created_at)


class _Profile:
    """The values of one user while changes are applied: the changed ones kept in order."""

    def __init__(self, user_id: str, existing: Iterable[ProfileValue], now: datetime) -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("user_id must be a non-empty str")
        self.user_id, self.now = user_id, now
        self.values: dict[str, ProfileValue] = {}
        self.changed: dict[str, None] = {}
        if isinstance(existing, (str, bytes)) or not hasattr(existing, "__iter__"):
            raise TypeError(f"existing must be an iterable of ProfileValue, got {type(existing).__name__}")
        for value in existing:
            if not isinstance(value, ProfileValue):
                raise TypeError(f"existing must hold ProfileValue records, got {type(value).__name__}")
            if value.user_id != user_id:
                raise ValueError(f"profile value {value.id!r} belongs to another user")
            self.values[value.id] = value

    def of_key(self, key: str) -> list[ProfileValue]:
        return [value for value in self.values.values() if _key_or_none(value.key) == key]

    def put(self, value: ProfileValue) -> ProfileValue:
        self.values[value.id] = value
        self.changed[value.id] = None
        return value

    def update(self, value: ProfileValue, **changes: object) -> ProfileValue:
        return self.put(dataclasses.replace(value, updated_at=self.now, **changes))  # type: ignore[arg-type]

    def add(self, key: str, text: str, at: datetime, source_id: str | None, set_by: str, **fields: object,
            ) -> ProfileValue:
        seed = f"memoryscope:profile:{self.user_id}:{key}:{normalise_name(text)}:{at.isoformat()}:{source_id}"
        value_id = uuid.uuid5(uuid.NAMESPACE_URL, seed).hex
        attempt = 0
        while value_id in self.values:
            attempt += 1
            value_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{seed}:{attempt}").hex
        return self.put(ProfileValue(
            id=value_id, user_id=self.user_id, key=key, value=text, valid_from=at,
            source_ids=[source_id] if source_id else [], set_by=set_by, created_at=self.now, updated_at=self.now,
            **fields))  # type: ignore[arg-type]

    def evidence(self, value: ProfileValue, source_id: str | None) -> None:
        if source_id and source_id not in value.source_ids:
            self.update(value, source_ids=[*value.source_ids, source_id])

    def result(self) -> list[ProfileValue]:
        return [self.values[value_id] for value_id in self.changed]


def _key_or_none(key: object) -> str | None:
    try:
        return normalise_key(key)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _when(value: object, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(value).__name__}")
    return as_aware(value)


def apply(existing: Iterable[ProfileValue], proposals: Iterable[ProfileProposal], *, user_id: str,
          now: datetime | None = None) -> list[ProfileValue]:
    """The profile values to write for `proposals` over the user's `existing` values: the new values
    and the existing ones that changed (evidence added, or ended by a newer value), each once, the
    inputs unmodified. Proposals are taken in the order of their `at`; the rules are the module's.
    A proposal whose key or value is empty or too long, or whose value only names its key
    ("family: family": `names_its_key`), is skipped (it holds nothing to keep).

    Raises TypeError on wrong types, ValueError for an empty `user_id` or an existing value of
    another user."""
    profile = _Profile(user_id, existing, _when(now, "now") if now is not None else utc_now())
    items = list(proposals)
    for item in items:
        if not isinstance(item, ProfileProposal):
            raise TypeError(f"proposals must hold ProfileProposal records, got {type(item).__name__}")
        _when(item.at, "a proposal's at")
    for proposal in sorted(items, key=lambda item: as_aware(item.at)):
        key, text = _key_or_none(proposal.key), _clean_value(proposal.value)
        if key is not None and text is not None and not names_its_key(proposal.key, text):
            _apply_one(profile, key, text, as_aware(proposal.at), proposal.source_id)
    return profile.result()


def _apply_one(profile: _Profile, key: str, text: str, at: datetime, source_id: str | None) -> None:
    values = profile.of_key(key)
    for value in values:  # the same value, true at that time: more evidence
        if _same(value.value, text) and (value.current or _start(value) <= at < as_aware(value.valid_to or at)):
            profile.evidence(value, source_id if isinstance(source_id, str) else None)
            return
    source = source_id if isinstance(source_id, str) and source_id else None
    if is_multi_valued(key):
        profile.add(key, text, at, source, "model")
        return
    later = [value for value in values if _start(value) > at]
    if later:  # said before a value known to start later: history, ending where that one starts
        successor = min(later, key=lambda value: (_start(value), value.id))
        new = profile.add(key, text, at, source, "model", valid_to=_start(successor), superseded_by=successor.id)
        for value in values:  # the value true at `at` ends there
            if _start(value) < at and value.valid_to is not None and as_aware(value.valid_to) > at:
                profile.update(value, valid_to=at, superseded_by=new.id)
        return
    new = profile.add(key, text, at, source, "model")
    for value in values:
        if value.current:
            profile.update(value, valid_to=at, superseded_by=new.id)


def set_by_user(existing: Iterable[ProfileValue], key: str, value: str, now: datetime, replace: bool = True,
                *, user_id: str) -> list[ProfileValue]:
    """The values to write when the user sets `key` to `value` at `now` (a correction): a value set
    by the user, true from `now` (or from the latest start the key has, when one is after `now`);
    with `replace` (always, for a single-valued key) the key's other current values end then,
    superseded by it. When the value is already current it is kept
    (its start unchanged) and marked as the user's. Raises ValueError for an empty or too long key
    or value, TypeError on wrong types."""
    moment = _when(now, "now")
    profile = _Profile(user_id, existing, moment)
    key = normalise_key(key)
    text = _clean_value(value)
    if text is None:
        raise ValueError(f"a profile value is 1 to {MAX_VALUE_CHARS} characters, not blank")
    replace = replace or not is_multi_valued(key)
    values = profile.of_key(key)
    current = [item for item in values if item.current]
    kept = next((item for item in current if _same(item.value, text)), None)
    if replace and kept is None:  # the correction is the latest value, even when a value starts after `now`
        moment = max([moment, *(_start(item) for item in values)])
    chosen = profile.update(kept, set_by="user") if kept else profile.add(key, text, moment, None, "user")
    if replace:
        for item in current:
            if item.id != chosen.id:
                profile.update(item, valid_to=max(moment, _start(item)), superseded_by=chosen.id)
    return profile.result()


def retract(existing: Iterable[ProfileValue], value_id: str, now: datetime, *, user_id: str) -> list[ProfileValue]:
    """The value `value_id` ended at `now` (no longer true; kept as history), or nothing when it is
    not current. Raises ValueError when the user has no such value."""
    profile = _Profile(user_id, existing, _when(now, "now"))
    found = profile.values.get(value_id) if isinstance(value_id, str) else None
    if found is None:
        raise ValueError(f"no profile value {value_id!r}")
    if found.current:
        profile.update(found, valid_to=profile.now)
    return profile.result()


def _order(value: ProfileValue) -> tuple:
    key = _key_or_none(value.key) or value.key
    position = _ORDER.index(key) if key in _ORDER else len(_ORDER)
    return (position, key, _start(value), normalise_name(value.value), value.id)


def current(values: Iterable[ProfileValue]) -> list[ProfileValue]:
    """The values true now (no end, not superseded), in the profile's key order (name, age, ...,
    then other keys alphabetically), each key's values by start."""
    return sorted((value for value in values if value.current), key=_order)


def history(values: Iterable[ProfileValue], key: str) -> list[ProfileValue]:
    """Every value `key` (normalised) has had, current or not, oldest start first."""
    wanted = normalise_key(key)
    return sorted((value for value in values if _key_or_none(value.key) == wanted),
                  key=lambda value: (_start(value), as_aware(value.created_at), value.id))


def profile_lines(values: Iterable[ProfileValue], language: str = "en", limit: int | None = None) -> list[str]:
    """The current profile as short lines for the context block, one per key: "home: Leeds (since
    2026-07)", "likes: tea, hiking"; in Chinese "住址：成都（2026-07 起）", "喜欢：茶、徒步".
    A single value shows the month it became true, when known. Raises ValueError for a language
    other than "en"/"zh" or a negative limit."""
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    grouped: dict[str, list[ProfileValue]] = {}
    for value in current(values):
        grouped.setdefault(_key_or_none(value.key) or value.key, []).append(value)
    lines = []
    for key, items in grouped.items():
        zh = language == "zh"
        label = _LABELS_ZH.get(key, key) if zh else key.replace("_", " ")
        text = ("、" if zh else ", ").join(item.value for item in items)
        since = items[0].valid_from if len(items) == 1 else None
        if since is not None:
            month = f"{as_aware(since):%Y-%m}"
            text += f"（{month} 起）" if zh else f" (since {month})"
        lines.append(f"{label}：{text}" if zh else f"{label}: {text}")
    return lines if limit is None else lines[:limit]

