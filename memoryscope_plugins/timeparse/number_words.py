"""Number words for the time parser: digits, English words and Chinese numerals."""

from __future__ import annotations

FEW = 3  # why: "a few" / "几" / "several" are read as 3 wherever a count is needed

_EN_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_EN_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}
_EN_SPECIAL = {
    "a": 1, "an": 1, "a couple of": 2, "couple of": 2, "a couple": 2, "a few": FEW, "few": FEW,
    "several": FEW, "a dozen": 12, "dozen": 12,
}

# Regex fragment matching an English count (digits, words, "a couple of", ...); longest forms first.
EN_NUMBER_PATTERN = (
    r"(?:\d{1,4}|a\s+couple\s+of|couple\s+of|a\s+couple|a\s+few|a\s+dozen|dozen|few|several|an|a|"
    r"(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[-\s](?:one|two|three|four|five|six|seven|eight|nine))?|"
    r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen)"
)

_ZH_DIGITS = {
    "零": 0, "〇": 0, "○": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}
_ZH_UNITS = {"十": 10, "百": 100}

# Regex fragment matching a Chinese count (digits, numerals up to 999, or 几 = a few).
ZH_NUMBER_PATTERN = r"(?:\d{1,4}|[零〇一二两三四五六七八九十百]{1,5}|几)"


def en_number(token: str) -> int | None:
    """Value of an English count such as "3", "three", "twenty-one", "a couple of"; None if unknown."""
    word = " ".join(token.lower().replace("-", " ").split())
    if word.isdigit():
        return int(word)
    if word in _EN_SPECIAL:
        return _EN_SPECIAL[word]
    if word in _EN_UNITS:
        return _EN_UNITS[word]
    parts = word.split()
    if parts and parts[0] in _EN_TENS:
        tail = _EN_UNITS.get(parts[1]) if len(parts) == 2 else 0
        if tail is not None and len(parts) <= 2:
            return _EN_TENS[parts[0]] + tail
    return None


def zh_number(token: str) -> int | None:
    """Value of a Chinese count such as "3", "三", "十二", "两", "二十一", "几" (= a few); None if unknown."""
    if not token:
        return None
    if token.isdigit():
        return int(token)
    if token == "几":
        return FEW
    total, current = 0, 0
    for char in token:
        if char in _ZH_DIGITS:
            current = _ZH_DIGITS[char]
        elif char in _ZH_UNITS:
            total += (current or 1) * _ZH_UNITS[char]
            current = 0
        else:
            return None
    return total + current


def zh_digit_string(token: str) -> int | None:
    """Value of digits read one by one, as years are written: "2023", "二〇二三", "二零二三"."""
    if token.isdigit():
        return int(token)
    digits = []
    for char in token:
        if char not in _ZH_DIGITS or char == "两":
            return None
        digits.append(str(_ZH_DIGITS[char]))
    return int("".join(digits)) if digits else None
