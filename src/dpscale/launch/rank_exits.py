"""How ranks ended, as their launcher reported it, and which end came first.

When one rank dies the others follow: gloo aborts a survivor (SIGABRT), a framework raises
on the lost connection, the launcher terminates the rest (SIGTERM). Launchers stamp each
failure when they observe it, to the second (torchrun) or not at all, so several ends share
one stamp and the launcher's "first" is a race. The cause is named by time first and, where
times tie, by how a rank ended: a kill from outside before a crash, before an error a rank
raised, before an abort, before the launcher's own terminations. Stdlib only.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from dataclasses import dataclass

# Within one stamp, the order in which ends cause one another (lower: more likely the cause).
_KILLED_FROM_OUTSIDE = {signal.SIGKILL}
_CRASHED = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
_ABORTED = {signal.SIGABRT}  # gloo, NCCL and MXNet abort a rank whose peer vanished
_STOPPED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}  # launchers stop the survivors so


def exit_signal(code: int) -> signal.Signals | None:
    """The signal behind -9 (Popen's status) or 137 (a shell's 128 + 9); None for an exit."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return signal.Signals(number)
    except ValueError:
        return None


def describe_exit(code: int) -> str:
    """``was killed by SIGKILL`` for -9 or 137, else ``exited with code N``."""
    sig = exit_signal(code)
    return f"was killed by {sig.name}" if sig else f"exited with code {code}"


@dataclass(frozen=True)
class RankExit:
    """One rank's end: who (``rank 1``, ``worker 1``), its exit code (negative: a signal) and
    the launcher's stamp in seconds (0.0 where it gives none; then its order counts)."""

    who: str
    code: int
    at: float = 0.0

    @property
    def words(self) -> str:
        return f"{self.who} {describe_exit(self.code)}"

    @property
    def consequence_rank(self) -> int:
        """0 for a kill from outside ... 4 for the launcher stopping a survivor."""
        sig = exit_signal(self.code)
        if sig is None:
            return 2  # a raised error: a cause, or a survivor's error about its lost peer
        for rank, kind in enumerate((_KILLED_FROM_OUTSIDE, _CRASHED, (), _ABORTED, _STOPPED)):
            if sig in kind:
                return rank
        return 1


def in_causal_order(exits: Iterable[RankExit]) -> list[RankExit]:
    """By stamp, then by how likely each end caused the others; the launcher's order last.
    One rank reported twice keeps its first report."""
    kept: dict[str, RankExit] = {}
    for end in exits:
        kept.setdefault(end.who, end)
    return sorted(kept.values(), key=lambda end: (end.at, end.consequence_rank))


def first_cause(exits: Iterable[RankExit]) -> str | None:
    """``rank 1 was killed by SIGKILL, then rank 0 was killed by SIGABRT``: the first end
    and those that followed it; None when no rank's end was reported."""
    ordered = in_causal_order(exits)
    if not ordered:
        return None
    first, *then = ordered
    return first.words + (f", then {', '.join(end.words for end in then)}" if then else "")
