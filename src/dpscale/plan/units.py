"""Rates and delays as a study writes them (``1gbit``, ``100us``, tc's syntax): their units,
the patterns the config's checks use, and their values in bit/s and seconds. The config
schema's ``$defs`` (rate, delay) hold the same patterns.

A rate's unit is taken in any case (``100Gbit``, ``10MBIT``): ``bit`` spelled out leaves one
meaning, tc's (k, m, g: 10^3, 10^6, 10^9 bit/s; tc reads them in any case too). A delay's is
not: ``Ms`` could be megaseconds, so only ``us`` and ``ms`` are delays."""

from __future__ import annotations

import re

RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}  # bit/s
DELAY_UNITS = {"us": 1e-6, "ms": 1e-3}  # seconds
UNITS = {**RATE_UNITS, **DELAY_UNITS}
NUMBER = r"[0-9]+(\.[0-9]+)?"
RATE = re.compile(rf"^{NUMBER}({'|'.join(RATE_UNITS)})$")
DELAY = re.compile(rf"^{NUMBER}({'|'.join(DELAY_UNITS)})$")
QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)")


def unit_of(written: str) -> str:
    """The unit as UNITS spells it: a rate's in lower case (``Gbit``, ``GBIT``: ``gbit``),
    any other as written (``MS`` stays ``MS``, not a unit: ambiguous)."""
    lowered = written.lower()
    return lowered if lowered in RATE_UNITS else written


def normal_rate(text: object) -> object:
    """``100Gbit`` -> ``100gbit``: a rate as RATE and tc write it, so the checks, the cells
    and tc see one spelling; anything else unchanged (the checks name it)."""
    match = QUANTITY.fullmatch(text) if isinstance(text, str) else None
    return f"{match.group(1)}{unit_of(match.group(2))}" if match else text


def parse_quantity(text: str, field_name: str = "") -> float:
    """``10gbit`` (or ``10Gbit``) -> 1e10 (bit/s), ``50us`` -> 5e-5 (s); a ValueError naming
    the field."""
    match = QUANTITY.fullmatch(str(text))
    if not match or unit_of(match.group(2)) not in UNITS:
        where = f"{field_name}: " if field_name else ""
        raise ValueError(
            f"{where}{text!r} is not a quantity; allowed: a number with one of "
            f"{sorted(UNITS)} (e.g. 10gbit, 50us)"
        )
    return float(match.group(1)) * UNITS[unit_of(match.group(2))]
