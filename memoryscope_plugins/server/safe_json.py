"""JSON from untrusted bodies: nesting depth checked before parsing, so no body can exhaust the stack.

`json.loads` recurses once per nesting level; a body of 100,000 ``[`` raises RecursionError, and a
merely deep value (metadata nested 2,000 levels) can make later code (``json.dumps``, the store) fail
the same way. The check runs in C-speed passes over the raw bytes: string literals are blanked out,
brackets are kept, and the running depth is the prefix sum of +1/-1 steps.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 64  # arrays/objects inside each other, counting the outermost
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = [0] * 256
for _c in b"[{":
    _STEP[_c] = 1
for _c in b"]}":
    _STEP[_c] = -1


class TooDeep(ValueError):
    """The JSON nests deeper than allowed."""


def depth(data: bytes) -> int:
    """The deepest nesting of arrays/objects in `data` (JSON or JSON Lines); brackets inside strings
    do not count. Malformed input gets an upper bound, which is what a refusal needs."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    return max(0, max(accumulate(_STEP[c] for c in brackets)))


def check_depth(data: bytes, max_depth: int = MAX_DEPTH) -> None:
    if depth(data) > max_depth:
        raise TooDeep(f"the JSON nests deeper than {max_depth} levels")


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` for untrusted input: ValueError (TooDeep, JSONDecodeError, UnicodeDecodeError) for
    anything it will not parse; never RecursionError."""
    import json
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    check_depth(raw, max_depth)
    return json.loads(raw)
