"""Study files, cluster files and cases files fuzzed as files (Hypothesis): YAML text made
from the schemas' fields with hostile values, then hostile shapes (another encoding, a
byte-order mark, a key given twice, nesting, aliases, control characters, cut short). Any
input is accepted or refused with exactly one line (a ConfigError, never a traceback),
within 2 s, leaving no folder behind; and `dpscale check-config` and the workflow give a
study file the same verdict. A cluster file's inter-node link is fuzzed as a log, a nominal
link (rate and latency) and every mix of their keys: it reads as one of the two or its one
line names the field.

Every input that ever failed is kept under tests/data/fuzz_corpus/ (its README) and
replayed here on every run. A new failure Hypothesis finds: save the falsifying file there.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from test_config_fuzz import HOSTILE, set_field

from conftest import REPO
from dpscale.analysis.answers.published_check import source_words
from dpscale.analysis.answers.published_intervals import source_key
from dpscale.cli import main
from dpscale.plan import cluster_file as cf
from dpscale.plan.config import config_schema
from dpscale.plan.config_files import MAX_FILE_BYTES
from dpscale.plan.errors import ConfigError
from dpscale.plan.published import read_cases
from dpscale.plan.published_cases import case_fields, case_schema
from dpscale.plan.yaml_shape import MAX_DEPTH
from dpscale.registry import STRATEGIES
from dpscale.study_check import check_study
from helpers.verdicts import OK, SNAKEMAKE_REFUSED, Verdict, check_config_verdict, workflow_verdict

CORPUS = REPO / "tests" / "data" / "fuzz_corpus"
SLINGSHOT = REPO / "tests" / "data" / "imports" / "nccl_all_reduce_gh200_2x4_slingshot.log"
# An answer within 2 s of CPU time, whatever the input (within_two_seconds): on a shared
# machine (the suite runs three tests at a time, beside other jobs) a wall-clock deadline of
# 2 s failed on an example that took 163 ms when run again; Hypothesis's own deadline is
# kept, on the wall clock, for a hang. No example database (.hypothesis/ in the working
# folder): a test here writes nothing.
CPU_SECONDS = 2.0
FUZZ = settings(
    deadline=10_000,  # ms
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextlib.contextmanager
def within_two_seconds() -> Iterator[None]:
    start = time.process_time()
    yield
    spent = time.process_time() - start
    assert spent < CPU_SECONDS, f"the check took {spent:.2f} s of CPU time"


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """The schemas, the default cases and the default config parsed once before any timed
    example (each is cached for the process, as in the workflow)."""
    check_study([], probe=False)


@contextlib.contextmanager
def empty_folder() -> Iterator[Path]:
    """An empty working folder for one example; afterwards it must hold only what the
    example wrote itself (a relative results_dir, data_dir or env_dir would land here)."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="dpscale-fuzz-") as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(before)


def made_nothing(folder: Path, written: set[str]) -> None:
    made = sorted(set(os.listdir(folder)) - written)
    assert not made, f"the check made {made}"


def kind_of(said: str) -> str:
    """What a verdict was about, for Hypothesis's statistics (pytest
    --hypothesis-show-statistics): accepted, the file, or a field."""
    if said == OK:
        return OK
    said = said.split(": ", 2)[1] if said.startswith("/") else said.split(":", 1)[0]
    return said.split(" ")[0][:40]


def one_line(verdict: Verdict) -> None:
    assert verdict.accepted or (verdict.lines == 1 and verdict.said.strip()), verdict


# -- hostile values and shapes ----------------------------------------------------------------

# keys a mapping of a file may hold besides the schema's: a line break, a tab, a bidi mark
KEYS = ["a\nb", "tab\there", "\u202eevil", "", " ", "x" * 300, "name"]
VALUE = st.one_of(st.integers(-3, 9), st.text(max_size=4), st.sampled_from(["\x07", "a\nb"]))
VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(),
    st.integers(-3, 70_000),
    st.integers(-3, 5000).map(float),  # a whole number written as a float
    st.floats(),
    st.text(max_size=24),
    st.booleans(),
    st.none(),
    st.lists(
        st.one_of(st.integers(-3, 70_000), st.floats(0, 100), st.text(max_size=6)), max_size=4
    ),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), VALUE, max_size=3),
    st.integers(MAX_DEPTH - 2, MAX_DEPTH + 40).map(lambda n: nested_list(n)),
)


def nested_list(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def top_key(text: str) -> str:
    first = next((line for line in text.splitlines() if line and line[0].isalpha()), "x:")
    return first.split(":", 1)[0]


# Each takes the YAML text and a drawn number; returns the file's bytes.
SHAPES: dict[str, Callable[[str, int], bytes]] = {
    "as is": lambda text, n: text.encode(),
    "utf-8 with a mark": lambda text, n: codecs.BOM_UTF8 + text.encode(),
    "utf-16": lambda text, n: text.encode("utf-16"),
    "utf-16 without a mark": lambda text, n: text.encode("utf-16-le"),
    "latin-1": lambda text, n: (text + "note: café\n").encode("latin-1", errors="replace"),
    "a key twice": lambda text, n: (text + f"{top_key(text)}: again\n").encode(),
    "nested": lambda text, n: (text + "deep: " + "[" * n + "]" * n + "\n").encode(),
    "nested mappings": lambda text, n: (
        text + "deep: " + "{a: " * n + "1" + "}" * n + "\n"
    ).encode(),
    "an alias cycle": lambda text, n: (text + "loop: &l [1, *l]\n").encode(),
    "an alias bomb": lambda text, n: (
        text
        + "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 7))
        + "batch_sizes: *a6\n"
    ).encode(),
    "a control character": lambda text, n: (
        text[: n % (len(text) + 1)] + chr(n % 32) + text[n % (len(text) + 1) :]
    ).encode(),
    "cut short": lambda text, n: text.encode()[: n % (len(text) + 1)],
    "tabs": lambda text, n: text.replace("  ", "\t").encode(),
    "a NUL byte": lambda text, n: text.encode() + b"\x00",
    "a stray byte": lambda text, n: text.encode() + bytes([128 + n % 128]),
}
# half the files as dumped, so that the fields' values reach the checks beyond the reading
SHAPED = st.one_of(
    st.just(("as is", 0)), st.tuples(st.sampled_from(sorted(SHAPES)), st.integers(0, 3000))
)


def shaped(text: str, shape: tuple[str, int]) -> bytes:
    data = SHAPES[shape[0]](text, shape[1])
    note(f"{shape[0]}: {data[:2000]!r}")
    return data


def changed(base: Any, changes: list[tuple[tuple, Any]]) -> Any:
    """``base`` with each change's field set; a field an earlier change took away (a mapping
    made a list) is left as it is."""
    document = copy.deepcopy(base)
    for path, value in changes:
        with contextlib.suppress(TypeError, AttributeError, IndexError, KeyError):
            set_field(document, path, copy.deepcopy(value))
    return document


def schema_fields(schema: dict[str, Any], root: dict[str, Any], path: tuple = ()) -> dict:
    """Every field of a schema (list items as index 0) -> its schema, $refs resolved."""
    found = {}
    for name, sub in (schema.get("properties") or {}).items():
        sub = resolved(sub, root)
        found[(*path, name)] = sub
        found |= schema_fields(sub, root, (*path, name))
        items = sub.get("items")
        if isinstance(items, dict):
            found[(*path, name, 0)] = resolved(items, root)
            found |= schema_fields(resolved(items, root), root, (*path, name, 0))
    return found


def resolved(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return {**root["$defs"][ref.removeprefix("#/$defs/")], **schema}
    return schema


WORDS = ["", "x", "10gbit", "0.5mbit", "50us", "resnet18", "host", "none", "2026-11-01", "USD"]


def schema_values(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy:
    """Values a field's schema allows and values just beside them (a bound plus or minus
    one, a whole number written as a float, an enum's neighbour)."""
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    options: list[st.SearchStrategy] = []
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    if "integer" in kinds or "number" in kinds:
        least = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        most = schema.get("maximum", least + 5000)
        options += [st.integers(least - 1, most + 1), st.integers(least, most).map(float)]
    if "number" in kinds:
        options.append(st.floats(least, most, allow_nan=False))
    if "string" in kinds:
        options += [st.sampled_from(WORDS), st.text(max_size=12)]
    if "boolean" in kinds:
        options.append(st.booleans())
    if "null" in kinds:
        options.append(st.none())
    items = schema.get("items")
    if "array" in kinds and isinstance(items, dict) and depth < 2:
        options.append(st.lists(schema_values(items, depth + 1), max_size=3))
    if "object" in kinds and depth < 2:
        optional = {
            key: schema_values(sub, depth + 1)
            for key, sub in (schema.get("properties") or {}).items()
        }
        options.append(st.fixed_dictionaries({}, optional=optional))
    for key in ("oneOf", "anyOf"):
        options += [schema_values(sub, depth + 1) for sub in schema.get(key) or []]
    return st.one_of(options) if options else VALUES


def field_changes(fields: dict[tuple, dict], *more: st.SearchStrategy) -> st.SearchStrategy:
    """Up to three (field, value) changes: a value from the field's schema, a hostile one,
    or one of ``more``."""
    values = {path: st.one_of(schema_values(sub), VALUES, *more) for path, sub in fields.items()}
    change = st.sampled_from(sorted(fields, key=str)).flatmap(
        lambda path: st.tuples(st.just(path), values[path])
    )
    return st.lists(change, max_size=3)


def dumped(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


# -- study files ----------------------------------------------------------------------------

SCHEMA = config_schema(STRATEGIES)
STUDY_FIELDS = schema_fields(SCHEMA, SCHEMA)
# relative folders: they would land in the example's empty working folder
STUDY = {"study": "fuzz", "results_dir": "results", "env_dir": "envs"}


@settings(FUZZ, max_examples=100)
@given(changes=field_changes(STUDY_FIELDS), shape=SHAPED)
def test_a_fuzzed_study_file_gets_one_verdict_in_one_line(changes, shape):
    """check-config and the workflow (Snakemake's loader, then common.smk's check) agree;
    where Snakemake's own loader refuses the file first, check-config refuses it too."""
    data = shaped(dumped(changed(STUDY, changes)), shape)
    with empty_folder() as folder:
        study = folder / "study.yaml"
        study.write_bytes(data)
        with within_two_seconds():
            said = check_config_verdict(study)
        one_line(said)
        event(f"check-config: {kind_of(said.said)}")
        workflow = workflow_verdict(study)
        if workflow.said == SNAKEMAKE_REFUSED:
            assert not said.accepted, "Snakemake's loader refuses what check-config accepts"
        else:
            assert workflow == said
        made_nothing(folder, {"study.yaml"})


# -- cluster files ------------------------------------------------------------------------

CLUSTER = {
    "name": "fuzz",
    "inter_node": {"nccl_tests_log": "slingshot.log", "ranks": 8, "rate": "200gbit"},
    "intra_node": {"nccl_tests_log": "slingshot.log", "ranks": 4, "rate": "3600gbit"},
    "devices_per_node": 4,
    "nodes": [2, 8],
    "strategy": "torch-ddp",
    "model": "resnet50-imagenet224-c1000",
    "batch_per_device": 256,
}
RATES = st.builds(
    "{}{}".format,
    st.one_of(st.integers(-1, 10**8), st.floats(0, 1e8, allow_nan=False).map(lambda x: f"{x:.3f}")),
    st.sampled_from(["kbit", "mbit", "gbit", "tbit", "", "gbps"]),
)
# a nominal link's latency: in range (0 us to 100 ms), just beyond, and not a delay at all
LATENCIES = st.one_of(
    st.builds(
        "{}{}".format,
        st.one_of(
            st.integers(-1, 10**6),
            st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:.3f}"),
            st.sampled_from(["1e3", "5.", ".5", "0x10"]),
        ),
        st.sampled_from(["us", "ms", "s", "ns", "", " us", "gbit", "US"]),
    ),
    st.sampled_from(["0us", "5us", "100ms", "100.001ms", "100000us", "100001us", "5 us"]),
)
# the inter-node link as a log, as a nominal link, or any mix of their keys: the file
# must read as exactly one of the two or be refused in one line naming the field
LINK_KEYS = {"nccl_tests_log": "slingshot.log", "ranks": 8, "rate": "200gbit", "latency": "5us"}
INTER_NODES = st.one_of(
    st.just(CLUSTER["inter_node"]),
    st.just({"rate": "200gbit", "latency": "5us"}),
    st.sets(st.sampled_from(cf.LINK_KEYS)).map(
        lambda keys: {key: LINK_KEYS[key] for key in cf.LINK_KEYS if key in keys}
    ),
)


def link_schema(most_ranks: int, *nominal: str) -> dict[str, Any]:
    """A link's fields; ``nominal``: the keys a link without a log takes (latency)."""
    return {
        "type": "object",
        "properties": {
            "nccl_tests_log": {"enum": ["slingshot.log", "none.log", "../slingshot.log", "."]},
            "ranks": {"type": "integer", "minimum": 2, "maximum": most_ranks},
            "rate": {"type": "string"},
            **{key: {"type": "string"} for key in nominal},
            "x": {},
        },
    }


# a cluster file's fields as a schema, for schema_values (plan.cluster_file has no schema file)
CLUSTER_SCHEMA = {
    "properties": {
        "name": {"type": "string"},
        "inter_node": link_schema(cf.MAX_NODES * cf.MAX_DEVICES_PER_NODE, "latency"),
        "intra_node": link_schema(cf.MAX_DEVICES_PER_NODE, "latency"),
        "devices_per_node": {"type": "integer", "minimum": 1, "maximum": cf.MAX_DEVICES_PER_NODE},
        "nodes": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": cf.MAX_NODES},
        },
        "strategy": {"enum": sorted(STRATEGIES)},
        "model": {"enum": [CLUSTER["model"], "resnet18-imagenet32-c10"]},
        "batch_per_device": {"type": "integer", "minimum": 1, "maximum": cf.MAX_BATCH},
        "unknown": {},
    }
}
CLUSTER_FIELDS = schema_fields(CLUSTER_SCHEMA, CLUSTER_SCHEMA)


def plausible(cluster: cf.ClusterFile) -> None:
    assert 1 <= cluster.devices_per_node <= cf.MAX_DEVICES_PER_NODE
    assert all(1 <= n <= cf.MAX_NODES for n in cluster.nodes) and cluster.batch_per_device >= 1
    for rate in (cluster.rate, cluster.intra.rate if cluster.intra else None):
        assert rate is None or cf.MIN_RATE_BIT_S <= rate.bits_per_s <= cf.MAX_RATE_BIT_S
    assert all(type(n) is int for n in (cluster.devices_per_node, *cluster.nodes))
    if cluster.nominal:  # a nominal link: its rate and latency, no log and no ranks
        assert cluster.ranks is None and cluster.rate is not None
        assert 0 <= cluster.rate.latency_s <= cf.MAX_LATENCY_S
        assert cluster.rate.source == cf.NOMINAL
    else:  # a measured log: its ranks, and a rate without a latency (the log measured it)
        assert cluster.log.is_file() and type(cluster.ranks) is int and cluster.ranks >= 2
        assert cluster.rate is None or cluster.rate.latency_s == 0


def cluster_verdict(path: Path) -> cf.ClusterFile | None:
    """The cluster file read (as `dpscale predict` and the study's clusters read it), or
    None after checking its one line."""
    try:
        return cf.read_cluster(path)
    except ConfigError as error:
        assert "\n" not in str(error) and str(error).startswith(str(path)), str(error)
        return None


@settings(FUZZ, max_examples=300)
@given(
    inter_node=INTER_NODES,
    changes=field_changes(CLUSTER_FIELDS, RATES, LATENCIES),
    shape=SHAPED,
)
def test_a_fuzzed_cluster_file_is_read_plausible_or_refused_in_one_line(inter_node, changes, shape):
    data = shaped(dumped(changed({**CLUSTER, "inter_node": inter_node}, changes)), shape)
    with empty_folder() as folder:
        shutil.copy(SLINGSHOT, folder / "slingshot.log")
        path = folder / "cluster.yaml"
        path.write_bytes(data)
        with within_two_seconds():
            read = cluster_verdict(path)
        event(f"cluster: {'ok' if read else 'refused'}")
        if read is not None:
            event(f"cluster: {'nominal' if read.nominal else 'log'}")
            plausible(read)
        made_nothing(folder, {"slingshot.log", "cluster.yaml"})


# Each inter-node key's values: mostly valid ones (so that whole links read), else ones just
# beside them and ones of another kind. Printable text only: every file here loads as
# YAML, so a refusal is the link's own.
PRINTABLE = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S"]), max_size=8)
OTHER_KINDS = st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.floats(), PRINTABLE)


def mostly(valid: list[Any], wrong: st.SearchStrategy) -> st.SearchStrategy:
    """A valid value three times in four, else a wrong one."""
    return st.integers(0, 3).flatmap(lambda n: st.sampled_from(valid) if n else wrong)


INTER_NODE_VALUES = {
    "nccl_tests_log": mostly(["slingshot.log"], st.sampled_from(["none.log", "", " ", "."])),
    "ranks": mostly(
        [2, 8, cf.MAX_NODES * cf.MAX_DEVICES_PER_NODE],
        st.one_of(
            st.integers(-1, cf.MAX_NODES * cf.MAX_DEVICES_PER_NODE + 1),
            st.integers(2, 64).map(float),
            OTHER_KINDS,
        ),
    ),
    "rate": mostly(
        ["1mbit", "200gbit", "10000gbit"],
        st.one_of(st.sampled_from(["0.999mbit", "10001gbit", "5us"]), RATES, OTHER_KINDS),
    ),
    "latency": mostly(
        ["0us", "5us", "100ms"],
        st.one_of(st.sampled_from(["100.001ms", "100001us", "5s"]), LATENCIES, OTHER_KINDS),
    ),
}
# which keys are there: a log, a nominal link, or any mix of the two, now and then with a
# key inter_node does not take
INTER_NODE_KEYS = st.one_of(
    st.sampled_from([("nccl_tests_log", "ranks"), ("nccl_tests_log", "ranks", "rate")]),
    st.just(("rate", "latency")),
    st.sets(st.sampled_from([*cf.LINK_KEYS, "x"])),
)


def inter_node_of(keys: Any) -> st.SearchStrategy:
    values = {key: INTER_NODE_VALUES.get(key, OTHER_KINDS) for key in keys}
    return st.fixed_dictionaries(values)


NAMED = re.compile(r"inter_node(\.(nccl_tests_log|ranks|rate|latency|x))?: ")


@settings(FUZZ, max_examples=200)
@given(inter_node=INTER_NODE_KEYS.flatmap(inter_node_of))
def test_a_fuzzed_inter_node_link_reads_as_a_log_or_a_nominal_link_or_names_its_field(
    inter_node,
):
    """Every key of inter_node present or absent, each with a valid or a wrong value, the
    rest of the file valid: a log (nccl_tests_log given) or a nominal link (none given),
    else one line naming inter_node or the one of its fields at fault."""
    note(f"inter_node: {inter_node!r}")
    with empty_folder() as folder:
        shutil.copy(SLINGSHOT, folder / "slingshot.log")
        path = folder / "cluster.yaml"
        path.write_text(dumped({**CLUSTER, "inter_node": inter_node}), encoding="utf-8")
        with within_two_seconds():
            try:
                read = cf.read_cluster(path)
            except ConfigError as error:
                said = str(error)
                assert "\n" not in said and said.startswith(f"{path}: "), said
                assert NAMED.match(said.removeprefix(f"{path}: ")), said
                event(f"inter_node: {kind_of(said)}")
                read = None
        if read is not None:
            plausible(read)
            assert read.nominal == (inter_node.get("nccl_tests_log") is None)
            event(f"inter_node: {'nominal' if read.nominal else 'log'}")
        made_nothing(folder, {"slingshot.log", "cluster.yaml"})


# -- cases files ------------------------------------------------------------------------------

ONE_CASE = CORPUS / "cases" / "one_case.yaml"
CASES = {"cases": read_cases(ONE_CASE)}
CASE_FIELDS = {
    ("cases", 0, *path): sub for path, sub in schema_fields(case_schema(), case_schema()).items()
} | {("cases",): {}, ("x",): {}}


def cases_verdict(path: Path) -> list | None:
    """The cases read and each one's typed fields parsed, or None after checking its one
    line."""
    try:
        cases = read_cases(path)
    except ConfigError as error:
        assert "\n" not in str(error) and str(path) in str(error), str(error)
        return None
    for case in cases:
        case_fields(case)
        # every source form is keyed and worded (the band's groups, the page's column)
        source_key(case["source"]), source_words(case["source"])
    return cases


@settings(FUZZ, max_examples=200)
@given(changes=field_changes(CASE_FIELDS), shape=SHAPED)
def test_a_fuzzed_cases_file_is_read_or_refused_in_one_line(changes, shape):
    data = shaped(dumped(changed(CASES, changes)), shape)
    with empty_folder() as folder:
        path = folder / "cases.yaml"
        path.write_bytes(data)
        with within_two_seconds():
            read = cases_verdict(path)
        event(f"cases: {'ok' if read else 'refused'}")
        made_nothing(folder, {"cases.yaml"})


# -- the corpus: every input that ever failed, replayed --------------------------------------

TWICE = "the key is given twice in one mapping"
# What the issue's rows (and later finds) must say: a file's name -> a part of its one line.
EXPECTED = {
    "config/nested_lists_10000.yaml": f"nested deeper than {MAX_DEPTH} levels",
    "config/latin1.yaml": ":1:11: not UTF-8: byte 0xe9 cannot be decoded",
    "config/utf16.yaml": "not UTF-8: it starts with a UTF-16 mark",
    "config/utf16_no_mark.yaml": "not UTF-8 text: line 1 holds a NUL byte",
    "config/utf8_mark.yaml": "not UTF-8: it starts with a UTF-8 with a byte-order mark",
    "config/floats_for_integers.yaml": "[0]: 1000.0 is written as a float",
    "config/float_batch.yaml": "batch_sizes[0]: 16.0 is written as a float",
    "config/duplicate_keys.yaml": f"'batch_sizes': {TWICE} (lines 2 and 3)",
    "config/duplicate_nested_key.yaml": f"'windows': {TWICE} (lines 3 and 4)",
    "config/interpreter_shell.yaml": "interpreters.torch: python3; touch /tmp/x does not exist",
    "config/alias_cycle.yaml": "batch_sizes[1]: a YAML alias refers to a value that contains it",
    "config/nul_byte.yaml": "holds a NUL byte",
    "config/empty_mapping_for_integer.yaml": "measure.repeats: {} is not of type 'integer'",
    "config/control_character.yaml": "character U+0007 is not allowed in YAML",
    "cluster/devices_per_node_1e9.yaml": "devices_per_node: 1,000,000,000 is out of range",
    "cluster/devices_per_node_float.yaml": "devices_per_node: 4.0 is not an integer >= 1 (written",
    "cluster/nodes_float.yaml": "nodes[1]: 1000.0 is not an integer >= 1 (written as a float",
    "cluster/nodes_huge.yaml": "nodes[1]: 10,000,000 is out of range; allowed: 1 to 100,000",
    "cluster/rate_100tbit.yaml": "inter_node.rate: '100000gbit' is out of range",
    "cluster/rate_1kbit.yaml": "inter_node.rate: '1kbit' is out of range",
    "cluster/latin1.yaml": "not UTF-8: byte 0xe9",
    "cluster/utf16.yaml": "not UTF-8: it starts with a UTF-16 mark",
    "cluster/duplicate_keys.yaml": f"'devices_per_node': {TWICE} (lines 3 and 7)",
    "cluster/nested_lists_10000.yaml": f"nested deeper than {MAX_DEPTH} levels",
    "cluster/log_name_with_line_break.yaml": "nccl_tests_log: 'line one\\nline two' is not a",
    "cluster/key_with_line_break.yaml": "'a\\nb': unknown key",
    "config/key_with_line_break.yaml": "measure.'a\\nb': '\\x07' holds a control character",
    "cases/key_with_line_break.yaml": "intra_node_link.'a\\nb': not a field of a case here",
    "cases/id_with_line_break.yaml": "cases[0] ('chainermn\\nsakura').nodes: 0 is not allowed",
    "cases/per_device_batch_float.yaml": "per_device_batch: 32.0 is written as a float",
    "cases/nodes_float.yaml": "nodes: 32.0 is written as a float",
    "cases/duplicate_keys.yaml": f"'nodes': {TWICE} (lines 9 and 10)",
    "cases/latin1.yaml": "not UTF-8: byte 0xe9",
    "cases/utf16.yaml": "not UTF-8: it starts with a UTF-16 mark",
    "cases/nested_lists_10000.yaml": f"nested deeper than {MAX_DEPTH} levels",
    "cases/source_as_words.yaml": "source: 'a blog post, no url' is not allowed; allowed: a "
    "mapping",
}


def corpus(kind: str) -> list[str]:
    return sorted(f"{kind}/{p.name}" for p in (CORPUS / kind).iterdir() if p.suffix == ".yaml")


def test_the_corpus_holds_every_expected_file_and_the_issues_rows():
    kept = {*corpus("config"), *corpus("cluster"), *corpus("cases")}
    assert set(EXPECTED) <= kept, set(EXPECTED) - kept
    rows = ("nested_lists_10000", "latin1", "utf16", "floats_for_integers", "duplicate_keys")
    assert {f"config/{row}.yaml" for row in (*rows, "interpreter_shell")} <= kept
    assert "cluster/devices_per_node_1e9.yaml" in kept


def refused_as_expected(name: str, verdict_said: str | None) -> None:
    if name in EXPECTED:
        assert verdict_said is not None and EXPECTED[name] in verdict_said, verdict_said


@pytest.mark.parametrize("name", corpus("config"))
def test_a_kept_study_file_gets_one_verdict_in_one_line(name):
    with empty_folder() as folder:
        study = folder / "study.yaml"
        shutil.copy(CORPUS / name, study)
        said = check_config_verdict(study)
        one_line(said)
        refused_as_expected(name, None if said.accepted else said.said)
        workflow = workflow_verdict(study)
        assert workflow == said or (workflow.said == SNAKEMAKE_REFUSED and not said.accepted)
        made_nothing(folder, {"study.yaml"})


@pytest.mark.parametrize("name", corpus("cluster"))
def test_a_kept_cluster_file_is_read_plausible_or_refused_in_one_line(name):
    with empty_folder() as folder:
        shutil.copy(SLINGSHOT, folder / "slingshot.log")
        path = folder / "cluster.yaml"
        shutil.copy(CORPUS / name, path)
        try:
            read = cf.read_cluster(path)
        except ConfigError as error:
            assert "\n" not in str(error)
            refused_as_expected(name, str(error))
        else:
            assert name not in EXPECTED
            plausible(read)


@pytest.mark.parametrize("name", corpus("cases"))
def test_a_kept_cases_file_is_read_or_refused_in_one_line(name):
    with empty_folder() as folder:
        path = folder / "cases.yaml"
        shutil.copy(CORPUS / name, path)
        try:
            read_cases(path)
        except ConfigError as error:
            assert "\n" not in str(error)
            refused_as_expected(name, str(error))
        else:
            assert name not in EXPECTED
            cases_verdict(path)


# The rows a file in the corpus cannot hold (git would carry a 50 MB file, a symlink loop or
# a folder badly): made here, each in an empty folder.
def oversized(folder: Path) -> Path:
    path = folder / "study.yaml"
    with open(path, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, nothing on disk
    return path


def symlink_loop(folder: Path) -> Path:
    (folder / "study.yaml").symlink_to(folder / "other.yaml")
    (folder / "other.yaml").symlink_to(folder / "study.yaml")
    return folder / "study.yaml"


def a_folder(folder: Path) -> Path:
    (folder / "study.yaml").mkdir()
    return folder / "study.yaml"


MADE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "50 MB": (
        oversized,
        f"52,428,800 bytes; allowed: at most {MAX_FILE_BYTES:,} bytes (1 MiB) for a YAML file "
        "dpscale reads",
    ),
    "a symlink loop": (symlink_loop, "cannot be read: Too many levels of symbolic links"),
    "a folder": (a_folder, "not a regular file; allowed: a YAML file"),
}


@pytest.mark.parametrize("row", sorted(MADE))
def test_a_made_study_file_is_one_line_in_check_config_and_dpscale_run(row, monkeypatch):
    """Snakemake reads ``--configfile`` before dpscale's Snakefile runs: a file its loader
    cannot open ends in its own traceback there (README, config errors). check-config and
    ``dpscale run``, which reads each file before it starts Snakemake, say one line."""
    make, said = MADE[row]
    with empty_folder() as folder:
        before = set(os.listdir(folder))
        study = make(folder)
        before |= set(os.listdir(folder))
        verdict = check_config_verdict(study)
        assert verdict.lines == 1 and verdict.said == f"{study}: {said}", verdict
        monkeypatch.setattr(
            "dpscale.cli_workflow.call", lambda command: pytest.fail("Snakemake ran")
        )
        with pytest.raises(SystemExit) as stopped:
            main(["run", str(study), "--", "-n"])
        assert stopped.value.code == f"dpscale: config error: {study}: {said}"
        made_nothing(folder, before)


@pytest.mark.parametrize("name", ["duplicate_keys.yaml", "empty_mapping_for_integer.yaml"])
def test_snakemake_n_and_check_config_say_the_same_line(name, tmp_path):
    """The workflow itself, not its stand-in above, on the two files Snakemake's own loader
    and merge take (a key given twice: the last wins; an empty mapping: config.yaml's value
    stays): common.smk reads and merges the files as check-config does."""
    study = tmp_path / "study.yaml"
    shutil.copy(CORPUS / "config" / name, study)
    command = [sys.executable, "-m", "snakemake", "-n", "--configfile", str(study)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in run.stderr.splitlines() if line.startswith("dpscale:")]
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert errors == [f"dpscale: config error: {check_config_verdict(study).said}"]
