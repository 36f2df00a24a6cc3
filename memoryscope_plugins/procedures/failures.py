"""Whether a procedure tells the agent to repeat a call that failed.

A procedure has no field that says "do" or "avoid": its ``do`` is what the agent will read, so
"call book_table with day Friday" is an instruction whatever the run taught. Rewriting the model's
text into a warning would be the engine's words passed off as a lesson; the honest rule is to refuse
it (`refusal` reports it as "repeats a failed call"). The rule, with no model:

* a **failed call** is one whose status is ``error``; when the run's outcome is ``failed``, its last
  call too (the run ended on it);
* its **failing values** are its argument values (strings of two characters or more, numbers) that no
  call of the same tool that succeeded gave the same argument; when no call of the tool succeeded,
  the values its error names, else all of them; its **failing keys** are the code-like argument
  names (``party_size``) no succeeded call of the tool used;
* the procedure **repeats** it when it is about that tool (among its ``tools``, its cited calls, or
  named in ``do``) and a clause of its ``do`` holds a failing key, or a failing value with the tool's
  or the argument's name ("call book_table with day Friday"; not "on a Friday"), without a word that says
  not to ("avoid", "never", "not", "instead of", "不要", "别", "而不是"...) and without the value the
  succeeded call gave that argument (then it tells the correction: "3500 元写 350000"). A call copied
  as the prompt shows it ("read_file {...} -> error: No such file") is read without its output: the
  "No" of an error message is no advice.

The ``when`` and ``why`` are not read: naming what failed is what a ``why`` is for. A failed shape
with no value in common (``day`` as "a weekday name" after "Friday" failed) is not seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run import Proposed, Run

_AVOID = re.compile(
    r"(?i)(?<![a-z])(?:avoid\w*|never|not|no|don'?t|doesn'?t|isn'?t|aren'?t|won'?t|can'?t|cannot|instead|rather than"
    r"|no longer|fails?|failed|invalid|wrong|rejects?|rejected|deprecated|except)(?![a-z])"
    r"|不要|不能|不可|不用|不再|不是|别|避免|勿|而不是|失败|无效|停用|弃用|除了")
# "error" says nothing about what to do: "read_file {...} -> error: ..." is the failed call copied
# a clause ends at punctuation before a space (not inside "app.toml" or "39.9,116.3")
_CLAUSE = re.compile(r"[.;!?,](?=\s|$)|[，。；！？、\n]|\s(?:and|then|but)\s|然后|再")
_SHOWN_OUTPUT = re.compile(r"->\s*\w+:.*")  # a call's status and output as the prompt shows them: the run's words
_CODE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")


@dataclass(slots=True)
class _Failure:
    tool: str
    values: dict[str, set[str]]  # argument -> its failing values, as text
    keys: set[str]
    fixed: dict[str, set[str]]  # argument -> the values succeeded calls of the tool gave it


def repeats_failure(proposed: Proposed, run: Run) -> bool:
    """Whether `proposed` tells the agent to repeat a failed call of `run` (module rules)."""
    failures = _failures(run)
    if not failures:
        return False
    calls = run.calls
    cited = {calls[n - 1].message.tool_call.name for n in proposed.calls  # type: ignore[union-attr]
             if 1 <= n <= len(calls)}
    about = set(proposed.tools) | cited
    clauses = [c for c in _CLAUSE.split(proposed.do) if c.strip()]
    for failure in failures:
        if failure.tool not in about and not _holds(proposed.do, failure.tool):
            continue
        for clause in clauses:
            if _AVOID.search(_SHOWN_OUTPUT.sub("", clause)):
                continue
            for key, values in failure.values.items():
                fixed = failure.fixed.get(key, set())
                if (any(_holds(clause, v) for v in values) and (_holds(clause, key) or _holds(clause, failure.tool))
                        and not any(_holds(proposed.do, v) for v in fixed)):
                    return True
            if any(_holds(clause, key) for key in failure.keys):
                return True
    return False


def _failures(run: Run) -> list[_Failure]:
    calls = [m.message.tool_call for m in run.calls if m.message.tool_call is not None]
    failed = [c for c in calls if c.status == "error"]
    if run.outcome == "failed" and calls and calls[-1] not in failed:
        failed.append(calls[-1])
    out = []
    for call in failed:
        succeeded = [c for c in calls if c.name == call.name and c.status != "error" and c is not call]
        fixed: dict[str, set[str]] = {}
        for other in succeeded:
            for key, value in other.arguments.items():
                fixed.setdefault(key, set()).update(_texts(value))
        values: dict[str, set[str]] = {}
        for key, value in call.arguments.items():
            texts = _texts(value) - fixed.get(key, set())
            if texts:
                values[key] = texts
        if not succeeded:
            named = {k: {t for t in v if t.casefold() in (call.error or "").casefold()} for k, v in values.items()}
            if any(named.values()):
                values = {k: v for k, v in named.items() if v}
        keys = {key for key in call.arguments if _CODE_KEY.fullmatch(key)} - set(fixed) if succeeded else set()
        out.append(_Failure(call.name, values, keys, fixed))
    return out


def _texts(value: Any) -> set[str]:
    """An argument's values as text: strings of two characters or more and numbers, inside lists and
    objects too."""
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, (int, float)):
        return {str(value)} if len(str(value)) >= 2 else set()
    if isinstance(value, str):
        text = " ".join(value.split())
        return {text} if len(text) >= 2 else set()
    if isinstance(value, dict):
        return {t for item in value.values() for t in _texts(item)}
    if isinstance(value, (list, tuple)):
        return {t for item in value for t in _texts(item)}
    return set()


def _holds(text: str, value: str) -> bool:
    """Whether `text` holds `value` as a whole (word-bounded, case-insensitive; any substring for Chinese)."""
    if re.search("[\u3400-\u9fff]", value):
        return value in text
    return re.search(rf"(?<![\w.-]){re.escape(value.casefold())}(?![\w-])", text.casefold()) is not None
