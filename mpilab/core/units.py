"""Sizes in bytes as the kit's drivers and OSU write them: ``32``, ``4K``, ``1M``, ``MIN:MAX``."""

import re

from mpilab.core.errors import UsageError

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_bytes(text):
    """``"32"`` -> 32, ``"1K"`` -> 1024, ``"1M"`` -> 1048576 (binary suffixes, as collbench)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise UsageError(
            f"bad size {text!r}; valid: an integer number of bytes, "
            "optionally with K, M or G (e.g. 32, 4K, 1M)"
        )
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


def parse_size_range(text, smallest=1):
    """``"32:1M"`` -> (32, 1048576); ``"1M"`` -> (smallest, 1048576) as OSU's ``-m``.

    ``smallest`` is the least size allowed and the MIN of a bare ``MAX``: 1 for collbench
    (as OSU's collectives), 0 for the ping-pong (as osu_latency).
    """
    lo, sep, hi = str(text).partition(":")
    lo_b, hi_b = (parse_bytes(lo), parse_bytes(hi)) if sep else (smallest, parse_bytes(lo))
    if lo_b < smallest or hi_b < lo_b:
        raise UsageError(
            f"bad size range {text!r}; valid: MIN:MAX with {smallest} <= MIN <= MAX "
            f"(e.g. {'32' if smallest else '0'}:{'1M' if smallest else '4M'})"
        )
    return lo_b, hi_b


def sizes_in_range(lo, hi):
    """The doubling sizes collbench (and pingpong) measure for ``-m lo:hi``; 0 is followed by 1."""
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s = 2 * s if s else 1
    return out


def format_bytes(b):
    """1048576 -> ``'1 MiB'``, 4096 -> ``'4 KiB'``, 1000 -> ``'1000 B'`` (whole binary units only)."""
    b = int(b)
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"
