"""How every YAML file dpscale reads from a user is read (plan.config_files.load_yaml: study,
cluster and cases files alike): a size bound checked before a byte is read, UTF-8 only, a
regular file, nesting and values bounded while parsing, each key once; and integers as
written (16.0 is not one) in every integer field of the config schema, of a published case
and of a cluster file, whose numbers also have plausible ranges. Each refusal is one line
naming the file (or the field)."""

from __future__ import annotations

import ast
import copy
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_config_fuzz import set_field

from conftest import REPO
from dpscale.plan import cluster_file as cf
from dpscale.plan.config import config_schema
from dpscale.plan.config_files import MAX_FILE_BYTES, load_yaml, study_config
from dpscale.plan.errors import ConfigError
from dpscale.plan.published import read_cases
from dpscale.plan.published_cases import case_schema, check_cases
from dpscale.plan.study import plan_study
from dpscale.plan.yaml_shape import MAX_DEPTH, MAX_VALUES, check_shape, field_name
from dpscale.registry import STRATEGIES

SLINGSHOT = REPO / "tests" / "data" / "imports" / "nccl_all_reduce_gh200_2x4_slingshot.log"
CORPUS = REPO / "tests" / "data" / "fuzz_corpus"


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        load_yaml(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def written(tmp_path: Path, data: bytes | str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# -- the file: its size, its encoding, what it is --------------------------------------------


def test_a_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:  # sparse: its size says it all, nothing is read
        handle.truncate(50 * 1024 * 1024)
    assert "52,428,800 bytes; allowed: at most 1,048,576 bytes (1 MiB)" in refusal(path)


def test_a_file_at_the_size_bound_is_read(tmp_path):
    text = "study: at-the-bound\n#"
    path = written(tmp_path, text + "x" * (MAX_FILE_BYTES - len(text) - 1) + "\n")
    assert path.stat().st_size == MAX_FILE_BYTES
    assert load_yaml(path) == {"study": "at-the-bound"}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ("study: café\n".encode("latin-1"), ":1:11: not UTF-8: byte 0xe9 cannot be decoded"),
        ("study: x\nnote: ü\n".encode("cp1252"), ":2:7: not UTF-8: byte 0xfc"),
        ("study: x\n".encode("utf-16"), ": not UTF-8: it starts with a UTF-16 mark"),
        ("study: x\n".encode("utf-32"), ": not UTF-8: it starts with a UTF-32 mark"),
        (b"\xef\xbb\xbfstudy: x\n", ": not UTF-8: it starts with a UTF-8 with a byte-order mark"),
        ("study: x\n".encode("utf-16-le"), ": not UTF-8 text: line 1 holds a NUL byte"),
    ],
    ids=["latin-1", "cp1252", "utf-16", "utf-32", "utf-8-bom", "utf-16-without-mark"],
)
def test_a_file_not_in_utf8_is_one_line_saying_so(tmp_path, data, said):
    path = written(tmp_path, data)
    message = refusal(path)
    assert message.startswith(f"{path}{said}"), message
    assert message.endswith("allowed: UTF-8 text without a byte-order mark")


def test_utf8_beyond_ascii_is_read(tmp_path):
    assert load_yaml(written(tmp_path, "description: ünï©ødé ✓ 中文\n"))["description"]


def test_a_symlink_loop_a_folder_a_fifo_and_a_missing_file_are_one_line(tmp_path):
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    assert "cannot be read: Too many levels of symbolic links" in refusal(tmp_path / "a.yaml")
    (tmp_path / "folder.yaml").mkdir()
    assert "not a regular file" in refusal(tmp_path / "folder.yaml")
    os.mkfifo(tmp_path / "fifo.yaml")  # never opened: reading it would wait for a writer
    assert "not a regular file" in refusal(tmp_path / "fifo.yaml")
    assert "cannot be read: No such file or directory" in refusal(tmp_path / "none.yaml")


def test_a_study_named_instead_of_its_file_is_shown_the_file(tmp_path, monkeypatch):
    """``dpscale status post002_throughput_law_mini``: the preset's file; the default study's
    name: config.yaml; any other missing file: how a study is named. One line each."""
    monkeypatch.chdir(REPO)
    default = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))["study"]
    preset = sorted((REPO / "studies").glob("*.yaml"))[0]
    expected = {
        Path(preset.stem): f"did you mean studies/{preset.name}?",
        Path(default): "the default study is config.yaml itself",
        tmp_path / "none.yaml": "a study is named by its YAML file",
    }
    for path, hint in expected.items():
        with pytest.raises(ConfigError) as refused:
            study_config([path])
        message = str(refused.value)
        assert message.startswith(f"{path}: cannot be read: No such file or directory; ")
        assert hint in message and "\n" not in message, message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_one_line(tmp_path):
    path = written(tmp_path, "study: x\n")
    path.chmod(0)
    assert "cannot be read: Permission denied" in refusal(path)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("study: nul\x00\n", "holds a NUL byte"),
        ("study: bell\x07\n", ":1: character U+0007 is not allowed in YAML"),
        ("study: [1, 2\n", "YAML syntax error: expected ',' or ']'"),
        ("- just\n- a list\n", "not a mapping of config keys"),
        ("study: !!python/object:os.system x\n", "YAML syntax error: could not determine"),
    ],
)
def test_what_is_not_a_yaml_mapping_is_one_line(tmp_path, text, said):
    assert said in refusal(written(tmp_path, text))


# -- the document: depth, values, keys --------------------------------------------------------


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_ten_thousand_nested_lists_are_one_line_not_a_recursion_error(tmp_path):
    path = written(tmp_path, f"study: deep\nbatch_sizes: {nested(10_000)}\n")
    message = refusal(path)
    assert message == (
        f"{path}:2:{len('batch_sizes: ') + MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} "
        f"levels; allowed: at most {MAX_DEPTH}"
    )


def test_the_loader_and_the_walk_draw_the_depth_bound_at_the_same_level(tmp_path):
    """The deepest document the loader reads is the deepest check_shape accepts."""
    deepest = load_yaml(written(tmp_path, f"x: {nested(MAX_DEPTH)}\n"))
    check_shape(deepest)
    with pytest.raises(ConfigError, match=f"deeper than {MAX_DEPTH}"):
        check_shape({"x": [deepest["x"]]})
    assert "nested deeper" in refusal(written(tmp_path, f"x: {nested(MAX_DEPTH + 1)}\n"))


def test_more_values_than_the_budget_stop_while_parsing(tmp_path):
    path = written(tmp_path, "x:\n" + "- 1\n" * (MAX_VALUES + 1))
    assert f"holds more than {MAX_VALUES:,} values" in refusal(path)


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("study: d\nbatch_sizes: [-5]\nbatch_sizes: [16]\n", "batch_sizes", (2, 3)),
        ("study: d\nmeasure:\n  windows: 1\n  repeats: 2\n  windows: 5\n", "windows", (3, 5)),
        ("study: d\nmeasure: {windows: 1, windows: 5}\n", "windows", (2, 2)),
        ("study: d\nmodels:\n  - {name: resnet18, name: resnet50}\n", "name", (3, 3)),
        ("study: d\n1: a\ntrue: b\n", True, (2, 3)),  # equal keys: True == 1
    ],
)
def test_a_key_given_twice_names_the_key_and_both_lines(tmp_path, text, key, lines):
    message = refusal(written(tmp_path, text))
    assert f"{key!r}: the key is given twice in one mapping (lines {lines[0]} and {lines[1]})" in (
        message
    )


def test_a_merge_key_may_be_overridden(tmp_path):
    text = "base: &b {windows: 3, repeats: 1}\nmeasure:\n  <<: *b\n  windows: 5\n"
    assert load_yaml(written(tmp_path, text))["measure"] == {"windows": 5, "repeats": 1}


USER_YAML_READERS = {"plan/config_files.py"}
# the package's own schemas, never a user's file: through plan.yaml_shape.load_shipped (libyaml)
SHIPPED_LOADER = {"plan/yaml_shape.py"}
SCHEMA_READERS = {"plan/config.py", "plan/published_cases.py", "plan/result.py"}


def test_every_yaml_parse_in_dpscale_is_the_strict_loader_or_a_schema_of_its_own():
    """A user's YAML enters through plan.config_files (StrictLoader); yaml.load and friends
    appear nowhere else but in the loader of dpscale's own files, which only the readers of
    its schema files call."""
    package = REPO / "src" / "dpscale"
    parsing = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(")
    found = set()
    for path in package.rglob("*.py"):
        if parsing.search(path.read_text(encoding="utf-8")):
            found.add(str(path.relative_to(package)))
    assert found <= USER_YAML_READERS | SHIPPED_LOADER, found - USER_YAML_READERS - SHIPPED_LOADER
    shipped = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "load_shipped(" in path.read_text(encoding="utf-8")
    }
    assert shipped - SHIPPED_LOADER == SCHEMA_READERS
    text = (package / "plan" / "config_files.py").read_text(encoding="utf-8")
    calls = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)]
    loaders = {kw.value.id for c in calls for kw in c.keywords if kw.arg == "Loader"}
    assert loaders == {"StrictLoader"}


# -- integers as written ------------------------------------------------------------------------


def integer_fields(schema: dict[str, Any], path: tuple = ()) -> list[tuple[tuple, dict]]:
    """Every field of a schema whose type is or includes ``integer`` (list items as index
    0), with its schema."""
    kinds = schema.get("type")
    found = (
        [(path, schema)]
        if "integer" in ([kinds] if isinstance(kinds, str) else kinds or [])
        else []
    )
    for name, sub in (schema.get("properties") or {}).items():
        found += integer_fields(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        found += integer_fields(schema["items"], (*path, 0))
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in schema.get(key) or []:
            found += integer_fields(sub, path)
    return found


def a_valid_integer(schema: dict[str, Any]) -> int:
    default = schema.get("default")
    if isinstance(default, int) and not isinstance(default, bool):
        return default
    return max(schema.get("minimum", 1), schema.get("exclusiveMinimum", 0) + 1)


# the containers an integer field sits in where config.yaml has none: each valid as it stands
CONTAINERS: dict[str, Any] = {
    "imports": [
        {
            "path": str(SLINGSHOT),
            "kind": "nccl-tests",
            "network": "slingshot",
            "nodes": 2,
            "devices_per_node": 4,
        }
    ],
    "interventions": {"slow_rank": {"rank": 1, "cpu_fraction": 0.5}},
    "cost": {
        "currency": "USD",
        "node_hour": {"cpu": 1.0},
        "source": "a price list",
        "date": "2026-11-01",
    },
}
# the fields that are valid only beside another: that one, and a value valid with it
BESIDE: dict[tuple, tuple[dict[str, Any], int]] = {
    ("measure", "max_windows"): ({"target_ci": 0.05}, 8),  # at least windows (5)
    ("cluster", "cpus_per_node"): ({}, 4),  # at least one CPU per device (2 a node)
    ("controls_batch_sizes", 0): ({}, 32),  # one of the study's batch sizes
}
CONFIG_INTEGERS = integer_fields(config_schema(STRATEGIES))


def test_the_walk_finds_the_integer_fields():
    fields = [path for path, _ in CONFIG_INTEGERS]
    assert len(fields) > 30
    assert ("batch_sizes", 0) in fields and ("measure", "timeout_s") in fields
    assert ("imports", 0, "nodes") in fields and ("mxnet_servers",) in fields


@pytest.mark.parametrize(
    ("path", "schema"), CONFIG_INTEGERS, ids=[".".join(map(str, p)) for p, _ in CONFIG_INTEGERS]
)
def test_every_integer_field_of_the_config_refuses_a_whole_float(
    default_config, tmp_path, monkeypatch, path, schema
):
    monkeypatch.chdir(tmp_path)
    config = copy.deepcopy(default_config)
    config.update(copy.deepcopy({k: v for k, v in CONTAINERS.items() if k == path[0]}))
    value = a_valid_integer(schema)
    if path in BESIDE:
        others, value = BESIDE[path]
        for key, other in others.items():
            set_field(config, (*path[:-1], key), other)
    if isinstance(path[-1], int):  # the list is this one value (no duplicate of another)
        set_field(config, path[:-1], [value])
    else:
        set_field(config, path, value)
    plan_study(config, STRATEGIES)  # accepted as an int
    if isinstance(path[-1], int):
        set_field(config, path[:-1], [float(value)])
    else:
        set_field(config, path, float(value))
    with pytest.raises(ConfigError) as refused:
        plan_study(config, STRATEGIES)
    assert str(refused.value) == (
        f"{field_name(path)}: {float(value)!r} is written as a float; allowed: an integer written "
        f"without a decimal point or exponent ({value})"
    )


def test_the_reported_floats_are_refused_from_a_study_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text, field in (
        ("batch_sizes: [16.0]", "batch_sizes[0]: 16.0"),
        ("nodes: [1.0e+3]", "nodes[0]: 1000.0"),
    ):
        study = written(tmp_path, f"study: f\n{text}\n")
        with pytest.raises(ConfigError, match=re.escape(f"{field} is written as a float")):
            plan_study(study_config([study]), STRATEGIES)


CASES = read_cases(REPO / "studies" / "published" / "cases.yaml")
CASE_INTEGERS = integer_fields(case_schema())


@pytest.mark.parametrize(
    ("path", "schema"), CASE_INTEGERS, ids=[".".join(map(str, p)) for p, _ in CASE_INTEGERS]
)
def test_every_integer_field_of_a_published_case_refuses_a_whole_float(path, schema):
    """In each real case that gives the field, alone (a case naming another is checked with
    it: all of them then)."""
    given = [i for i, case in enumerate(CASES) if found(case, path) is not None]
    assert given, f"no case gives {path}"
    cases = copy.deepcopy(CASES)
    *parents, last = path
    node = cases[given[0]]
    for step in parents:
        node = node[step]
    node[last] = float(node[last])
    with pytest.raises(ConfigError) as refused:
        check_cases(cases, "cases.yaml")
    assert f").{field_name(path)}: {node[last]!r} is written as a float" in str(refused.value)


def found(case: Any, path: tuple) -> Any:
    for step in path:
        try:
            case = case[step]
        except (KeyError, IndexError, TypeError):
            return None
    return case


def test_the_case_walk_finds_its_integer_fields():
    assert {("nodes",), ("devices_per_node",), ("per_device_batch",)} <= {
        p for p, _ in CASE_INTEGERS
    }


# -- cluster files: integers as written, plausible ranges ------------------------------------

GOOD_CLUSTER = {
    "name": "test",
    "inter_node": {"nccl_tests_log": "slingshot.log", "ranks": 8, "rate": "200gbit"},
    "devices_per_node": 4,
    "nodes": [2, 8],
    "model": "resnet50-imagenet224-c1000",
    "batch_per_device": 256,
}


def cluster(tmp_path: Path, **changes: Any) -> Path:
    shutil.copy(SLINGSHOT, tmp_path / "slingshot.log")
    entry = copy.deepcopy(GOOD_CLUSTER)
    for key, value in changes.items():
        *parents, last = key.split("__")
        node = entry
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return written(tmp_path, yaml.safe_dump(entry), "cluster.yaml")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            {"devices_per_node": 1_000_000_000},
            "devices_per_node: 1,000,000,000 is out of range; allowed: 1 to 1,024",
        ),
        ({"devices_per_node": 1025}, "devices_per_node: 1,025 is out of range"),
        (
            {"devices_per_node": 4.0},
            "devices_per_node: 4.0 is not an integer >= 1 (written as a float",
        ),
        ({"nodes": [2, 100_001]}, "nodes[1]: 100,001 is out of range; allowed: 1 to 100,000"),
        ({"nodes": [2, 1e3]}, "nodes[1]: 1000.0 is not an integer >= 1 (written as a float"),
        ({"nodes": [True]}, "nodes[0]: True is not an integer >= 1"),
        (
            {"batch_per_device": 65537},
            "batch_per_device: 65,537 is out of range; allowed: 1 to 65,536",
        ),
        ({"inter_node__ranks": 10**12}, "inter_node.ranks: 1,000,000,000,000 is out of range"),
        (
            {"inter_node__rate": "100000gbit"},
            "inter_node.rate: '100000gbit' is out of range; allowed: 1mbit to 10000gbit",
        ),
        ({"inter_node__rate": "999kbit"}, "inter_node.rate: '999kbit' is out of range"),
        (
            {"intra_node": {"nccl_tests_log": "slingshot.log", "ranks": 4, "rate": "20000gbit"}},
            "intra_node.rate: '20000gbit' is out of range",
        ),
    ],
)
def test_a_cluster_beyond_a_plausible_range_is_one_line(tmp_path, changes, said):
    path = cluster(tmp_path, **changes)
    with pytest.raises(ConfigError) as refused:
        cf.read_cluster(path)
    assert str(refused.value) == f"{path}: {said}" or str(refused.value).startswith(
        f"{path}: {said}"
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"devices_per_node": 1024, "nodes": [1, 100_000], "batch_per_device": 65536},
        {"devices_per_node": 1, "nodes": [1], "batch_per_device": 1},
        {"inter_node__rate": "1mbit"},
        {"inter_node__rate": "10000gbit"},
    ],
)
def test_a_cluster_at_the_ends_of_the_ranges_is_read(tmp_path, changes):
    cf.read_cluster(cluster(tmp_path, **changes))
