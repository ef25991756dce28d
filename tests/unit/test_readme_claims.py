"""The capability table (docs/guide/strategies.md, linked from the README) says what the
registry and evidence/ support: a row per strategy, multi-node and collectives as the
adapters declare them, the `comm` remedies each applies (and where only), and every GPU a
CUDA cell names has an `ok` result in evidence/ with that strategy, that GPU and that world
size."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO
from dpscale.registry import STRATEGIES

PAGE = REPO / "docs" / "guide" / "strategies.md"
EVIDENCE = REPO / "evidence"
HEADER = "| strategy | CPU | CUDA | multi-node |"


def capability_rows() -> dict[str, dict[str, str]]:
    """The table under HEADER: strategy -> {column: text}."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    columns = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = dict(zip(columns, cells, strict=True))
    return rows


def gpu_results() -> set[tuple[str, str, int]]:
    """(strategy, GPU name, world size) of every `ok` GPU cell result in evidence/."""
    found = set()
    for path in EVIDENCE.glob("*/**/cells/**/*.json"):
        result = json.loads(path.read_text(encoding="utf-8"))
        names = (result.get("system") or {}).get("gpu_names_seen") or []
        if result.get("status") == "ok":
            cell = result["cell"]
            found |= {(cell["strategy"], name, cell["world_size"]) for name in names}
    return found


ROWS = capability_rows()


def test_every_registered_strategy_has_a_row_and_every_row_a_strategy():
    assert sorted(ROWS) == sorted(STRATEGIES)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_layout_columns_are_what_the_adapter_declares(name):
    row, strategy = ROWS[name], STRATEGIES[name]
    yes_no = {True: "yes", False: "no"}
    assert row["multi-node"] == row["emulated network"] == yes_no[strategy.multi_node]
    assert row["collectives"] == yes_no[not strategy.one_process]
    assert row["CPU"] == ("1 device per node" if strategy.one_process else "yes")


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_remedies_column_is_what_the_adapter_applies(name):
    """``a, b (CUDA only), c (synthetic only); bucket size, cycle time`` or ``none``."""
    comm = STRATEGIES[name].comm
    text = ROWS[name]["`comm` remedies"]
    remedies, _, knobs = text.partition(";")
    tokens = [re.fullmatch(r"([\w-]+)(?: \((.+)\))?", t.strip()) for t in remedies.split(",")]
    assert all(tokens), f"{name}: {text!r}: each remedy is 'name' or 'name (where only)'"
    named = dict(token.groups() for token in tokens)
    expected = {
        remedy: "CUDA only"
        if remedy in dict(comm.cuda_only)
        else "synthetic only"
        if remedy in dict(comm.not_in_training)
        else None
        for remedy in comm.remedies
    }
    assert named == (expected or {"none": None})
    settable = {"bucket size": comm.bucket, "cycle time": comm.cycle}
    assert [k.strip() for k in knobs.split(",") if k.strip()] == [
        k for k, v in settable.items() if v
    ]


def cuda_claim(text: str) -> tuple[list[str], int | None]:
    """The GPUs a CUDA cell names in parentheses, and the world size it states (None: none
    stated); "not yet run" names none."""
    if text.startswith("not yet run"):
        return [], None
    gpus = re.search(r"\(([^)]*)\)", text).group(1).split(", ")
    return gpus, 1 if re.match(r"1 (rank on 1 GPU|GPU)\b", text) else None


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_cuda_claim_has_a_result_with_that_gpu_in_evidence(name):
    text = ROWS[name]["CUDA"]
    gpus, world = cuda_claim(text)
    ran = {(gpu, size) for strategy, gpu, size in gpu_results() if strategy == name}
    for short in gpus:
        sizes = {size for gpu, size in ran if short in gpu.split()}
        assert sizes, (
            f"{name}: the capability table says it ran on {short}; evidence/ has no ok result"
        )
        if world is not None:
            assert world in sizes, f"{name}: no {world}-rank result on {short} in evidence/"
    if not gpus:
        assert not ran, f"{name}: the table says not yet run on CUDA; evidence/ has {ran}"
    if "between ranks not yet run" in text:
        assert all(size == 1 for _, size in ran), f"{name}: evidence/ has multi-rank GPU cells"
