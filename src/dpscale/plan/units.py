"""Rates and delays as a study writes them (``1gbit``, ``100us``, tc's syntax): their units,
the patterns the config's checks use, and their values in bit/s and seconds. The config
schema's ``$defs`` (rate, delay) hold the same patterns."""

from __future__ import annotations

import re

RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}  # bit/s
DELAY_UNITS = {"us": 1e-6, "ms": 1e-3}  # seconds
UNITS = {**RATE_UNITS, **DELAY_UNITS}
NUMBER = r"[0-9]+(\.[0-9]+)?"
RATE = re.compile(rf"^{NUMBER}({'|'.join(RATE_UNITS)})$")
DELAY = re.compile(rf"^{NUMBER}({'|'.join(DELAY_UNITS)})$")
QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-z]+)")


def parse_quantity(text: str, field_name: str = "") -> float:
    """``10gbit`` -> 1e10 (bit/s), ``50us`` -> 5e-5 (s); a ValueError naming the field."""
    match = QUANTITY.fullmatch(str(text))
    if not match or match.group(2) not in UNITS:
        where = f"{field_name}: " if field_name else ""
        raise ValueError(
            f"{where}{text!r} is not a quantity; allowed: a number with one of "
            f"{sorted(UNITS)} (e.g. 10gbit, 50us)"
        )
    return float(match.group(1)) * UNITS[match.group(2)]
