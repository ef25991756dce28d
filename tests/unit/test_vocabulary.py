"""One vocabulary for a layout, its network and a remedy: plan/ names them, every other module
uses those names instead of spelling them again (issue 49)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from dpscale.analysis.results.rows import no_remedy
from dpscale.plan.cell import CELL_PATTERN, MODEL_KEY, Cell, ModelConfig, parse_cell_id
from dpscale.plan.layout import LAYOUT_ID, Layout, nodes_words, plural
from dpscale.plan.remedies import NO_REMEDY, Comm, is_no_remedy

SRC = Path(__file__).resolve().parents[2] / "src" / "dpscale"
LAYOUT_COLUMNS = {"network", "nodes", "devices_per_node", "world_size"}
# "host" as a machine's hostname, not a network: the result's system.host key where it is
# written (runner/sysinfo, the SLURM task's own record) and read from a SLURM node list;
# importing plan there would tie the runner and launcher's records to the analysis' columns
HOSTNAME_SITES = {"runner/sysinfo.py", "launch/slurm/task.py", "launch/slurm/allocation.py"}
# the modules that write the report's words (launch and runner write one-line errors)
REPORT_PACKAGES = ("analysis", "render")
LAYOUT_WORDING = re.compile(
    r"\bnodes?(\(s\))? [x×] (\{\}|\d)"  # 2 nodes x 1 device, 2 node(s) x 1 (not a formula)
    r"|\bdev(ices?|ice\(s\)|\.) on\b"  # 4 device(s) on 2 nodes, 2 dev. on 1 node
    r"|\bdevice\(s\)"  # 2 device(s)
    r"|\{\}x\{\}"  # 2x1
    r"|^(1 )?(node|device)$"  # the pieces of a plural: 1 node, a word handed to plural()
)


def _modules(packages: tuple[str, ...] = ()) -> Iterator[tuple[str, ast.Module]]:
    """(path under src/dpscale, parsed module) of every module outside plan/."""
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith("plan/") or (packages and not name.startswith(packages)):
            continue
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with ``{}`` for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _strings(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Every string literal and f-string but docstrings and an f-string's own pieces."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(value) for value in node.values)
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None and id(node) not in skip:
            yield node, text


def column_lists(name: str, tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if names & {"devices_per_node", "world_size"} and len(names & LAYOUT_COLUMNS) > 1:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def host_networks(name: str, tree: ast.Module) -> list[str]:
    if name in HOSTNAME_SITES:
        return []
    return [f"{name}:{node.lineno}" for node, text in _strings(tree) if text == "host"]


def layout_wordings(name: str, tree: ast.Module) -> list[str]:
    return [
        f"{name}:{node.lineno}: {text!r}"
        for node, text in _strings(tree)
        if LAYOUT_WORDING.search(text)
    ]


def test_no_layout_column_list_outside_plan() -> None:
    found = [line for name, tree in _modules() for line in column_lists(name, tree)]
    assert not found, "use plan.columns (LAYOUT, SPREAD, PLACEMENT, ...):\n" + "\n".join(found)


def test_no_host_network_literal_outside_plan() -> None:
    found = [line for name, tree in _modules() for line in host_networks(name, tree)]
    assert not found, "use plan.layout.HOST_NETWORK or plan.columns.SYSTEM_HOST: " + str(found)


def test_only_plan_layout_writes_a_layout_in_words() -> None:
    found = [line for n, tree in _modules(REPORT_PACKAGES) for line in layout_wordings(n, tree)]
    assert not found, "use plan.layout.Layout's wordings:\n" + "\n".join(found)


def test_no_remedy_literal_outside_plan() -> None:
    """No ``comm`` compared with a literal "none": plan.remedies.NO_REMEDY is its name."""
    found = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and "comm" in ast.unparse(node):
                parts = [node.left, *node.comparators]
                if any(isinstance(p, ast.Constant) and p.value == "none" for p in parts):
                    found.append(f"{name}:{node.lineno}")
    assert not found, found


OLD_SITES = {  # the wordings as the five sites wrote them before plan.layout
    "analysis/laws/words.py": """
def layout_words(nodes, devices_per_node, network):
    node = "1 node" if nodes == 1 else f"{nodes} nodes"
    device = "1 device" if devices_per_node == 1 else f"{devices_per_node} devices"
    return f"{node} x {device}" + (f" over {network}" if nodes > 1 else "")
""",
    "render/answer_figures.py": """
def _plural(count, word):
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
def layout_label(nodes, devices_per_node, network):
    return f"{_plural(int(nodes), 'node')} × {_plural(int(devices_per_node), 'device')}, {network}"
""",
    "render/plots.py": """
def layout_label(world, nodes, network):
    if nodes == 1:
        return f"{world} device(s)"
    return f"{world} device(s) on {nodes} nodes over {network}"
""",
    "render/startup_plot.py": """
def layout_label(row):
    where = "1 node" if row["nodes"] == 1 else f"{row['nodes']} nodes ({row['network']})"
    return f"{row['strategy']}, {row['world_size']} dev. on {where}"
""",
    "analysis/answers/compare.py": """
def _point_words(row):
    layout = f"{row['nodes']}x{row['devices_per_node']}"
    network = f" over {row['network']}" if row["nodes"] > 1 else ""
""",
}


@pytest.mark.parametrize("name", sorted(OLD_SITES))
def test_the_old_wordings_would_fail(name: str) -> None:
    assert layout_wordings(name, ast.parse(OLD_SITES[name]))


def test_the_old_spellings_would_fail() -> None:
    columns = ast.parse('KEY = ["strategy", "network", "nodes", "devices_per_node", "world_size"]')
    assert column_lists("x.py", columns)
    assert host_networks("analysis/x.py", ast.parse('ok["network"].fillna("host")'))
    assert not host_networks("runner/sysinfo.py", ast.parse('{"host": "h"}'))


@pytest.mark.parametrize(
    ("layout", "network", "words", "axis", "legend", "bar", "short"),
    [
        (Layout(1, 1), "host", "1 node x 1 device", "1 node × 1 device, host", "1 device(s)",
         "1 dev. on 1 node", "1x1"),
        (Layout(1, 2), "host", "1 node x 2 devices", "1 node × 2 devices, host", "2 device(s)",
         "2 dev. on 1 node", "1x2"),
        (Layout(2, 1), "1gbe", "2 nodes x 1 device over 1gbe", "2 nodes × 1 device, 1gbe",
         "2 device(s) on 2 nodes over 1gbe", "2 dev. on 2 nodes (1gbe)", "2x1 over 1gbe"),
        (Layout(4, 8), "ib", "4 nodes x 8 devices over ib", "4 nodes × 8 devices, ib",
         "32 device(s) on 4 nodes over ib", "32 dev. on 4 nodes (ib)", "4x8 over ib"),
    ],
)  # fmt: skip
def test_layout_words(
    layout: Layout, network: str, words: str, axis: str, legend: str, bar: str, short: str
) -> None:
    assert layout.words(network) == words
    assert layout.axis_label(network) == axis
    assert layout.legend(network) == legend
    assert layout.bar_label(network) == bar
    assert layout.short(network) == short
    assert Layout.of_world(layout.world_size, layout.nodes) == layout


def test_layout_from_rows_and_id_part() -> None:
    row = {"nodes": 2, "devices_per_node": 4, "network": "1gbe"}
    frame = pd.DataFrame([row])
    assert Layout.from_row(row) == Layout(2, 4) == Layout.from_row(frame.iloc[0])
    assert Layout.from_row(next(frame.itertuples(index=False))) == Layout(2, 4)
    assert Layout(2, 4).world_size == 8
    assert (
        Layout(2, 4).id_part(64, 1)
        == "n2-d4-b64-r1"
        == LAYOUT_ID.format(nodes=2, devices=4, batch=64, repeat=1)
    )
    assert Layout(2, 1).model_words() == "2 nodes x 1 device"
    assert Layout(1, 2).model_words() == "1 node x 2 devices"
    assert Layout(2, 1).model_legend() == "2 node(s) x 1"
    assert Layout(2, 2).counts() == "4 devices, 2 nodes"
    assert Layout(1, 8).counts() == "8 devices, 1 node"


@pytest.mark.parametrize(
    ("count", "word", "words"),
    [(1, "node", "1 node"), (2, "node", "2 nodes"), (1, "device", "1 device"),
     (0, "device", "0 devices"), (1.0, "cell", "1 cell"), (1200, "image", "1,200 images")],
)  # fmt: skip
def test_one_is_said_in_the_singular(count: float, word: str, words: str) -> None:
    """Issue 77: "1 node", "1 device", never "1 nodes" (plan.layout.plural, nodes_words)."""
    assert plural(count, word) == words
    assert nodes_words(int(count)) == plural(count, "node")


def _cell(**changes: object) -> Cell:
    fields = dict(
        study="s", strategy="torch-ddp", model=ModelConfig("resnet18", "imagenet", 64, 10),
        mode="synthetic", nodes=2, devices_per_node=1, batch_per_device=16, repeat=3,
        comm=Comm("powersgd", rank=2),
    )  # fmt: skip
    return Cell(**{**fields, **changes})  # type: ignore[arg-type]


def test_cell_id_pattern_round_trip() -> None:
    cell = _cell()
    parts = parse_cell_id(cell.cell_id)
    assert parts == {
        "strategy": "torch-ddp",
        "model": "resnet18-imagenet64-c10",
        "mode": "synthetic-comm-powersgd-r2",
        "nodes": "2",
        "devices": "1",
        "batch": "16",
        "repeat": "3",
    }
    assert CELL_PATTERN.format(**parts) == cell.cell_id
    assert cell.cell_id == CELL_PATTERN.format(
        strategy=cell.strategy, model=cell.model.key, mode=cell.mode_key, nodes=cell.nodes,
        devices=cell.devices_per_node, batch=cell.batch_per_device, repeat=cell.repeat,
    )  # fmt: skip
    with pytest.raises(ValueError, match="not a cell id"):
        parse_cell_id("torch-ddp/resnet18-imagenet64-c10/n2-d1-b16-r0")


def test_model_key_round_trip() -> None:
    for model in (ModelConfig("resnet18", "imagenet", 64, 10), ModelConfig("resnet50")):
        assert ModelConfig.from_key(model.key) == model
        assert MODEL_KEY.fullmatch(model.key)
    with pytest.raises(ValueError, match="not a model key"):
        ModelConfig.from_key("vgg16")


def test_no_remedy_value_and_column_agree() -> None:
    values = [NO_REMEDY, None, float("nan"), "fp16", "none-bucket1"]
    assert [is_no_remedy(v) for v in values] == [True, True, True, False, False]
    assert no_remedy(pd.Series(values, dtype=object)).tolist() == [True, True, True, False, False]
    assert Comm().key == NO_REMEDY
