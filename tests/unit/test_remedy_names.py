"""No module outside plan/, strategies/ and frameworks/ spells a communication remedy's name:
the analysis, the report, the steps, the launcher and the command line ask plan.remedies'
declaration instead (``remedy_of(key).hidden``, ``.fidelity``, ``BY_FIDELITY``, ...), so a
remedy is declared in one place and a new one cannot be missed by a module that kept its own
list (remedy_ranking ranked an unknown remedy last, silently)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from dpscale.plan.remedies import DECLARED, NO_REMEDY

SRC = Path(__file__).resolve().parents[2] / "src" / "dpscale"
# where a remedy's name may be written: its declaration, the adapters that list it, the hooks
ROOMS = ("plan/", "strategies/", "frameworks/")
NAMES = tuple(remedy.name for remedy in DECLARED)
# "none" alone is an English word ("the results have none") and matplotlib's, not only no
# remedy: a comm compared with it is test_vocabulary's test_no_remedy_literal_outside_plan;
# a key built on it ("none-bucket1") is still found here
WORDS = {NO_REMEDY}


def remedy_literals(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal (f-strings' pieces and docstrings too) that is a
    remedy's name, or a remedy's key: the name, a dash, its parameters."""
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        if (text in NAMES and text not in WORDS) or any(text.startswith(f"{n}-") for n in NAMES):
            yield node.lineno, text


def test_the_check_finds_a_name_and_a_key_and_lets_words_be():
    source = (
        'HIDDEN = ("delayed", "delayed-fp16")\n'
        'key = f"powersgd-r{rank}"\n'
        'x = "2bit-t0.5" if a else "none-bucket1"\n'
        'style = "none"\n'
        'amp = "amp_fp16"\n'
        '"""fp16 and bf16 round the gradients."""\n'
    )
    assert [text for _, text in remedy_literals(source)] == [
        "delayed",
        "delayed-fp16",
        "powersgd-r",
        "2bit-t0.5",
        "none-bucket1",
    ]


def test_no_remedy_name_is_spelled_outside_plan_strategies_and_frameworks():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith(ROOMS):
            continue
        source = path.read_text(encoding="utf-8")
        found += [f"{name}:{line}: {text!r}" for line, text in remedy_literals(source)]
    assert not found, (
        "ask plan.remedies' declaration (remedy_of(key), BY_FIDELITY, ...) or a name in plan/ "
        "instead:\n" + "\n".join(found)
    )


def test_every_adapter_lists_only_declared_remedies():
    from dpscale.registry import STRATEGIES

    for strategy in STRATEGIES.values():
        support = strategy.comm
        listed = {*support.remedies, *support.collectives}
        listed |= {name for name, _ in (*support.cuda_only, *support.not_in_training)}
        assert listed <= set(NAMES), (strategy.name, sorted(listed - set(NAMES)))
