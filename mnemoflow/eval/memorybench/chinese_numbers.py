"""Numbers written in a Chinese legal text, as digit strings: "三年六个月" -> ["3", "6"].

JuDGE's reference reads sentence lengths, fines and statute numbers with
``chinese2digits.takeNumberFromString(text)["digitsStringList"]``; this is the same reading for
what those texts contain: Arabic numbers (with decimals), Chinese numerals with the units
十 百 千 万 亿 (两 = 2, 〇/零 = 0), and an Arabic number followed by 万 or 亿 ("1.5万" -> 15000).
"""

from __future__ import annotations

import re

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
           "七": 7, "八": 8, "九": 9}  # fmt: skip
_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
_BIG_UNITS = {"万": 10_000, "亿": 100_000_000}
_NUMBER = re.compile(
    r"(?P<arabic>\d+(?:\.\d+)?)(?P<big>[万亿]?)|(?P<chinese>[零〇一二两三四五六七八九十百千万亿]+)"
)


def chinese_numeral(text: str) -> int:
    """A run of Chinese numeral characters as an integer ("一千二百" 1200, "十二" 12)."""
    total, section, digit = 0, 0, None
    for char in text:
        if char in _DIGITS:
            digit = _DIGITS[char]
        elif char in _SMALL_UNITS:
            section += (1 if digit is None else digit) * _SMALL_UNITS[char]
            digit = None
        else:  # 万 / 亿 close a section
            section += digit or 0
            total = (total + section) * _BIG_UNITS[char]
            section, digit = 0, None
    return total + section + (digit or 0)


def _digit_string(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def numbers_in(text: str) -> list[str]:
    """Every number in ``text``, in order, as a digit string."""
    found = []
    for match in _NUMBER.finditer(text):
        if match.group("arabic") is not None:
            value = float(match.group("arabic"))
            if match.group("big"):
                value *= _BIG_UNITS[match.group("big")]
                found.append(_digit_string(value))
            else:
                found.append(match.group("arabic"))
        elif any(c not in _BIG_UNITS for c in match.group("chinese")):
            found.append(str(chinese_numeral(match.group("chinese"))))
    return found
