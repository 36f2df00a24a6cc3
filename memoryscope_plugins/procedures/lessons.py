"""What a run's own calls teach, read without a model: a failed call and the call that then worked.

A small model often fails to write this down (it copies the user's request as the situation, or the
failed call as what to do: docs/benchmarks.md, "Procedures"), and what it writes may pass the checks
and still miss the fix; yet the run shows it plainly. The learning step stores these *engine lessons*
beside the model's procedures (`step`), marked ``metadata["by"] = "engine"``.

The rules, for each tool whose call failed (status ``error``), its first failure only:

* **fixed by a later call of the same tool** that succeeded: the arguments that changed, each told by
  its *shape*, never its value ("day as text like 9999-99-99, not a word", "amount as an integer",
  "to as a list"); a value the failed call's error lists itself ("carriers: DHL, UPS") is the tool's
  word and is told as it is ("carrier as DHL"). A long text that changed by a few words (a query) is
  told by the words added and removed when the tool's side shows them (its error, or a call made in
  between: "sql with created_at instead of date"). A call of another tool made in between whose result
  gave the new value ("id 2735943") comes first: "first call lookup_city; location from what it
  returns". When the error names a unit ("in cents", "以分为单位") and the number an argument holds
  was multiplied or divided by a power of ten ("3500元" -> 350000), the lesson says so, with an
  example from 1 and never a number of the user's: "multiply the number in amount by a hundred (1
  becomes 100)"; only of the argument the error names, or of the only one whose number so changed;
* **replaced by another tool** the error names ("... is deprecated; use search_flights") that then
  succeeded: "call search_flights instead of search_flights_v1";
* otherwise (no call worked after it, or nothing changed): no lesson.

The ``why`` is the failed call's error, normalised as the tool statistics keep it, with the failed
call's own argument values taken out too ("未知的城市编码：<str>"). So a lesson holds tool and argument
names, shapes and the tools' words only: nothing a user said, nothing that would tell another user of
the agent's team whose run it was. It is still checked like any proposal (`run.refusal`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..storage.text_analysis import CJK
from ..tool_calls import mentions, normalise_error
from ..types import ToolCall
from .run import Proposed, Run, users_numbers

LONG_TEXT = 40  # characters: a longer text argument is told by the words that changed, not its shape
SHAPE_TEXT = 24  # characters: a text up to this long is told by its picture ("9999-99-99")
MIN_VALUE = 2  # characters: a shorter value is not looked for in an error or a result
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[\u4e00-\u9fff]+")
_MISSING = object()

_PHRASES: dict[str, dict[str, Any]] = {
    "en": {
        "when": "calling {tool}", "first": "first call {helper}", "from": "pass {key} from what {helper} returns",
        "instead": "call {other} instead of {tool}", "shape": "pass {key} as {new}",
        "not": "pass {key} as {new}, not {old}", "without": "leave {key} out", "exact": "pass {key} as {value}",
        "words": "in {key}, use {added} instead of {removed}", "join": "; ", "list": ", ",
        "why": "{tool} failed: {error}",
        "int": "an integer", "float": "a number", "bool": "true or false", "list_": "a list", "dict": "an object",
        "null": "null", "zh_text": "Chinese text", "word": "a word", "words_": "words", "text": "text",
        "like": "text like {picture}",
        "times": "multiply the number in {key} by {factor}", "divide": "divide the number in {key} by {factor}",
        "example": " ({small} becomes {large})", "example_down": " ({large} becomes {small})",
        "factors": {10: "ten", 100: "a hundred", 1000: "a thousand", 10_000: "ten thousand", 1_000_000: "a million"},
    },
    "zh": {
        "when": "调用 {tool} 时", "first": "先调用 {helper}", "from": "{key} 用 {helper} 返回的值",
        "instead": "改用 {other}，不要用 {tool}", "shape": "{key} 写成{new}", "not": "{key} 写成{new}，不是{old}",
        "without": "不传 {key}", "exact": "{key} 写成 {value}", "words": "{key} 里用 {added}，不用 {removed}",
        "join": "；", "list": "、", "why": "{tool} 报错：{error}",
        "int": "整数", "float": "数字", "bool": "true 或 false", "list_": "列表", "dict": "对象",
        "null": "null", "zh_text": "中文", "word": "英文单词", "words_": "英文词语", "text": "文本",
        "like": " {picture} 这样的文本",
        "times": "{key} 的数值乘以{factor}", "divide": "{key} 的数值除以{factor}",
        "example": "（比如 {small} 写成 {large}）", "example_down": "（比如 {large} 写成 {small}）",
        "factors": {10: "十", 100: "一百", 1000: "一千", 10_000: "一万", 1_000_000: "一百万"},
    },
}


@dataclass(slots=True)
class _Call:
    number: int  # 1-based, as the prompt numbers the run's calls
    call: ToolCall


def lessons(run: Run, language: str) -> list[Proposed]:
    """The engine lessons of `run` (module rules), one per failed tool at most, in the run's order;
    `language` "zh" words them in Chinese, anything else in English."""
    words = _PHRASES["zh" if language == "zh" else "en"]
    calls = [_Call(n, m.message.tool_call) for n, m in enumerate(run.calls, start=1)
             if m.message.tool_call is not None]
    out: list[Proposed] = []
    taught: set[str] = set()
    private = users_numbers(run)
    for index, failed in enumerate(calls):
        call = failed.call
        if call.status != "error" or call.name in taught:
            continue
        lesson = _lesson(failed, calls[index + 1:], words, private)
        if lesson is not None:
            taught.add(call.name)
            out.append(lesson)
    return out


def _lesson(failed: _Call, later: Sequence[_Call], words: dict[str, Any], private: set[str]) -> Proposed | None:
    tool = failed.call.name
    error = failed.call.error or ""
    why = words["why"].format(tool=tool, error=normalise_error(error, failed.call.arguments))
    fixed = next((c for c in later if c.call.name == tool and c.call.status == "ok"), None)
    if fixed is None:
        other = next((c for c in later if c.call.status == "ok" and c.call.name != tool
                      and mentions(error, c.call.name)), None)
        if other is None:
            return None
        return Proposed(when=words["when"].format(tool=tool),
                        do=words["instead"].format(other=other.call.name, tool=tool), why=why,
                        tools=[tool, other.call.name], calls=[failed.number, other.number])
    between = [c for c in later if c.number < fixed.number and c.call.status == "ok" and c.call.name != tool]
    parts, helpers = _changes(failed.call, fixed.call, between, error, words, private)
    if not parts:
        return None
    first = [words["first"].format(helper=h.call.name) for h in helpers]
    do = words["join"].join([*first, *parts])
    return Proposed(when=words["when"].format(tool=tool), do=do, why=why,
                    tools=[tool, *(h.call.name for h in helpers)],
                    calls=sorted({failed.number, fixed.number, *(h.number for h in helpers)}))


def _changes(failed: ToolCall, fixed: ToolCall, between: Sequence[_Call], error: str, words: dict[str, Any],
             private: set[str]) -> tuple[list[str], list[_Call]]:
    """What changed from the failed call's arguments to the fixed one's, as phrases, and the calls in
    between whose results the new values came from (in the run's order)."""
    parts: list[str] = []
    helpers: dict[int, _Call] = {}
    scaled: list[tuple[int, str, Any, Any]] = []  # a told change whose unit may have changed too
    for key in sorted(set(failed.arguments) | set(fixed.arguments)):
        old, new = failed.arguments.get(key, _MISSING), fixed.arguments.get(key, _MISSING)
        if old == new:
            continue
        if new is _MISSING:
            parts.append(words["without"].format(key=key))
            continue
        source = _source_of(new, between)
        if source is not None:
            helpers[source.number] = source
            parts.append(words["from"].format(key=key, helper=source.call.name))
            continue
        if isinstance(new, str) and isinstance(old, str) and max(len(new), len(old)) > LONG_TEXT:
            phrase = _word_change(key, old, new, error, between, words)
            if phrase is not None:
                parts.append(phrase)
                helpers.update({c.number: c for c in _showing(phrase, between)})
            continue
        if isinstance(new, str) and len(new) >= MIN_VALUE and mentions(error, new):
            parts.append(words["exact"].format(key=key, value=new))
            continue
        new_shape = _shape(new, words)
        old_shape = None if old is _MISSING else _shape(old, words)
        if old_shape is None:
            parts.append(words["shape"].format(key=key, new=new_shape))
        elif old_shape != new_shape:
            parts.append(words["not"].format(key=key, new=new_shape, old=old_shape))
        if old is not _MISSING:
            scaled.append((len(parts), key, old, new))
    parts = _with_unit_change(parts, scaled, error, words, private)
    return parts, [helpers[n] for n in sorted(helpers)]


def _with_unit_change(parts: list[str], changed: Sequence[tuple[int, str, Any, Any]], error: str,
                      words: dict[str, Any], private: set[str]) -> list[str]:
    """`parts` with the unit change of an argument after its phrase (`changed`: where its phrase
    ends, its name, old and new value), when the error names a unit and the argument: the one it
    names, or the only argument whose number changed by a power of ten."""
    if not _names_a_unit(error):
        return parts
    found = [(end, key, phrase) for end, key, old, new in changed
             if (phrase := _scale(old, new, words, private)) is not None]
    named = [item for item in found if mentions(error, item[1])]
    chosen = named or (found if len(found) == 1 else [])
    out = list(parts)
    for end, key, phrase in reversed(chosen):
        out.insert(end, phrase.format(key=key))
    return out


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: words by which an error says what unit a number is in; only then is a change by a power of ten a unit's
#: (no one-character Chinese unit: 分 and 元 are in 部分 and 元素; no "second": "the second argument")
_UNITS = ("unit", "units", "cent", "cents", "pence", "ms", "millisecond", "milliseconds", "seconds", "minute",
          "minutes", "byte", "bytes", "KB", "MB", "kb", "mb", "meter", "meters", "metre", "metres", "km", "gram",
          "grams", "kg", "单位", "毫秒", "分钟", "字节", "公里", "千米", "厘米", "毫米", "千克", "公斤")


def _names_a_unit(error: str) -> bool:
    return any(mentions(error, unit) for unit in _UNITS)


def _number(value: Any) -> float | None:
    """The number a value holds: itself, or the one number a short text writes ("3500元"); None else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and len(value) <= SHAPE_TEXT:
        found = _NUMBER.findall(value.replace(",", ""))
        return float(found[0]) if len(found) == 1 else None
    return None


def _scale(old: Any, new: Any, words: dict[str, Any], private: set[str]) -> str | None:
    """The unit change between two values that hold the same quantity in other units (yuan and fen,
    seconds and milliseconds: the number times or divided by a power of ten), as a phrase with
    ``{key}`` left to fill: the factor in words, and an example from 1 (a small model follows
    "1 becomes 100" where it gets "times a hundred" wrong), left out when its number is one of the
    user's (`private`): a lesson never writes a number of the run."""
    before, after = _number(old), _number(new)
    if not before or not after or before < 0 or after < 0:
        return None
    for factor, name in words["factors"].items():
        up = abs(after - before * factor) <= 1e-9 * after
        if up or abs(before - after * factor) <= 1e-9 * before:
            phrase = str(words["times" if up else "divide"]).replace("{factor}", name)
            if str(factor) not in private:
                example = words["example" if up else "example_down"]
                phrase += example.replace("{small}", "1").replace("{large}", str(factor))
            return phrase
    return None


def _source_of(value: Any, between: Sequence[_Call]) -> _Call | None:
    """The last call in between whose result holds `value` (a text or number; for a list, every
    element), or whose result `value` starts from (a path built on a returned folder)."""
    items = value if isinstance(value, list) else [value]
    texts = [_text(item) for item in items]
    if not texts or any(t is None or len(t) < MIN_VALUE for t in texts):
        return None
    for candidate in reversed(between):
        result = (candidate.call.result or "").strip()
        if not result:
            continue
        if all(mentions(result, t) for t in texts if t is not None):
            return candidate
        if len(texts) == 1 and texts[0] is not None and len(result) >= 3 and "\n" not in result \
                and texts[0].startswith(result):
            return candidate
    return None


def _word_change(key: str, old: str, new: str, error: str, between: Sequence[_Call],
                 words: dict[str, str]) -> str | None:
    """A long text told by its changed words, when the tool's side (the error, or a result in
    between) shows every one of them; else None."""
    old_words, new_words = set(_WORDS.findall(old)), set(_WORDS.findall(new))
    added = [w for w in dict.fromkeys(_WORDS.findall(new)) if w not in old_words]
    removed = [w for w in dict.fromkeys(_WORDS.findall(old)) if w not in new_words]
    if not added or not removed or len(added) > 3 or len(removed) > 3:
        return None
    tool_side = "\n".join([error, *(c.call.result or "" for c in between)])
    if not all(mentions(tool_side, w) for w in added + removed):
        return None
    return words["words"].format(key=key, added=words["list"].join(added), removed=words["list"].join(removed))


def _showing(phrase: str, between: Sequence[_Call]) -> list[_Call]:
    """The calls in between whose result shows a word of `phrase` that is no common word (a column)."""
    found = []
    for candidate in between:
        result = candidate.call.result or ""
        if any("_" in w and mentions(result, w) for w in _WORDS.findall(phrase)):
            found.append(candidate)
    return found


def _shape(value: Any, words: dict[str, str]) -> str:
    """A value told without its content: its JSON type, or a text's kind and picture."""
    if isinstance(value, bool):
        return words["bool"]
    if isinstance(value, int):
        return words["int"]
    if isinstance(value, float):
        return words["float"]
    if isinstance(value, list):
        return words["list_"]
    if isinstance(value, dict):
        return words["dict"]
    if value is None:
        return words["null"]
    text = str(value)
    if CJK.search(text):
        return words["zh_text"]
    if not any(ch.isdigit() for ch in text) and re.fullmatch(r"[A-Za-z][A-Za-z' -]*", text) and \
            not (text.isupper() and len(text) <= 5) and len(text) > 3:
        return words["words_"] if " " in text.strip() else words["word"]
    if len(text) > SHAPE_TEXT:
        return words["text"]
    return words["like"].format(picture=_picture(text))


def _picture(text: str) -> str:
    """Letters as a / A, digits as 9, the rest kept: "2026-05-08" -> "9999-99-99", "DHL" -> "AAA"."""
    return "".join("9" if ch.isdigit() else ("A" if ch.isupper() else "a") if ch.isalpha() else ch for ch in text)


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


__all__ = ["lessons"]
