"""Numbers and keys in words, for the sentences the report leads with."""

from __future__ import annotations

import math

import numpy as np

from dpscale.analysis.laws.accuracy import resolved
from dpscale.plan.cell import MODEL_KEY


def is_known(value: float) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def readable_model(key: str) -> str:
    """``resnet50-imagenet32-c10`` -> ``ResNet-50 (32 px, 10 classes)``; a zoo model keeps
    its name: ``keras.MobileNetV2 (32 px, 10 classes)``."""
    match = MODEL_KEY.fullmatch(str(key))
    if not match:
        return str(key)
    name = f"ResNet-{match['depth']}" if match["depth"] else match["name"]
    return f"{name} ({match['image_size']} px, {match['classes']} classes)"


def batch_words(value: float) -> str:
    """A break-even global batch in words: "any batch", "never (up to 1e8)", "1,234"."""
    if not np.isfinite(value):
        return "never (up to 1e8)"
    return "any batch" if value == 0 else f"{value:,.0f}"


def even_interval(even: float, half: float) -> str:
    """A break-even global batch's 95% interval, " (95% CI 9 to 17)"; "" where there is none
    (0 or never, or no half-width); one the fits cannot bound (fits.break_even_ci95 returns
    an infinite half-width) says so."""
    if not is_known(half) or not is_known(even) or not np.isfinite(even) or even <= 0:
        return ""
    if math.isinf(half):
        return " (95% interval unbounded: the fits cannot tell the per-image gain from zero)"
    return f" (95% CI {max(math.floor(even - half), 0):,} to {math.ceil(even + half):,})"


def speedup_words(value: float, half: float) -> str:
    """ "1.62x (±0.08)"; "1.62x (no interval)" where none is known."""
    interval = f"±{half:.2f}" if is_known(half) and np.isfinite(half) else "no interval"
    return f"{value:.2f}x ({interval})"


def percent_words(value: float, half: float) -> str:
    """ "81% ±4": a fraction and its 95% half-width, in percent."""
    interval = f" ±{100 * half:.0f}" if is_known(half) and np.isfinite(half) else ""
    return f"{100 * value:.0f}%{interval}"


def delta_words(
    points: float, half: float, seeds: float = math.nan, needed: float = math.nan
) -> str:
    """An accuracy delta (percentage points) and its 95% half-width, in words; a half-width
    too wide to tell anything (accuracy.RESOLVED_HALF) is "not resolved", with the seeds run
    and those that would resolve 1 point."""
    if not is_known(half):
        return f"final accuracy {points:+.1f} points (no interval: fewer than 2 seeds)"
    if not resolved(half / 100):
        ran = f"{seeds:.0f} seeds, " if is_known(seeds) else ""
        more = (
            f"about {needed:,.0f} seeds would resolve ±1 point"
            if is_known(needed)
            else "more seeds than 10,000 would be needed to resolve ±1 point"
        )
        return f"final accuracy not resolved ({ran}95% interval ±{half:.1f} points; {more})"
    lowest, highest = points - half, points + half
    if lowest > 0 or highest < 0:
        sense = "higher" if points > 0 else "lower"
        interval = f"95% CI {lowest:+.1f} to {highest:+.1f}"
        return f"final accuracy {abs(points):.1f} points {sense} ({interval})"
    spread = f"{points:+.1f} ± {half:.1f} points"
    return f"final accuracy not distinguishable from 1 device ({spread})"
