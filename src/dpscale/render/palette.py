"""One colour per strategy in every figure: the registered strategies in the registry's order
take the Okabe-Ito colours (distinguishable with every common colour-vision deficiency), in an
order that keeps the two oranges and the two blues apart for the first five; a strategy not
registered (results from elsewhere) takes the next free colour, by sorted name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Okabe & Ito (2008), "Color Universal Design": blue, vermillion, bluish green, reddish
# purple, black first (five colours no two alike), then sky blue, orange, yellow and grey
OKABE_ITO = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#000000",
    "#56B4E9",
    "#E69F00",
    "#F0E442",
    "#999999",
)


def hex_to_rgb(colour: str) -> tuple[float, float, float]:
    """``#D55E00`` -> (0.835, 0.369, 0.0), as matplotlib takes it."""
    digits = colour.lstrip("#")
    red, green, blue = (int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return red, green, blue


def strategy_colours(
    registered: Sequence[str], present: Iterable[str] = ()
) -> dict[str, tuple[float, float, float]]:
    """Each strategy's colour: ``registered`` in their order first, then those ``present``
    but not registered, sorted; past the palette's nine, the colours repeat."""
    extra = sorted(set(present) - set(registered))
    names = [*dict.fromkeys(registered), *extra]
    return {name: hex_to_rgb(OKABE_ITO[i % len(OKABE_ITO)]) for i, name in enumerate(names)}
