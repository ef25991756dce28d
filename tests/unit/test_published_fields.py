"""A published case's typed fields (plan.published_cases, workflow/schemas/
published_cases.schema.yaml) are checked before any job: each bad field is one line naming
the case, the field and what is allowed; any value of a typed field is accepted or refused
so, and an accepted case is predicted or says why not, never a traceback."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from dpscale.analysis.answers.published_check import check
from dpscale.plan.errors import ConfigError
from dpscale.plan.published import DEFAULT_PROFILE, read_cases
from dpscale.plan.published_cases import case_fields, case_schema, check_cases
from dpscale.plan.traffic import KINDS
from dpscale.steps.published import profiles

CASES = read_cases(REPO / "studies" / "published" / "cases.yaml")
IDS = [case["id"] for case in CASES]
PROFILES = profiles(REPO / DEFAULT_PROFILE)
WHERE = "published_cases.cases: 'cases.yaml'"
ABSENT = object()  # a field left out: its default


def put(case: dict, path: str, value: Any) -> None:
    """Set (or, with ABSENT, remove) a dotted field of a case."""
    *parents, last = path.split(".")
    for key in parents:
        case = case[key]
    if value is ABSENT:
        case.pop(last, None)
    else:
        case[last] = value


def refused(cases: list[dict]) -> str | None:
    try:
        check_cases(cases, WHERE)
    except ConfigError as error:
        return str(error)
    return None


def with_field(case_id: str, path: str, value: Any) -> tuple[list[dict], int]:
    cases = copy.deepcopy(CASES)
    index = IDS.index(case_id)
    put(cases[index], path, value)
    return cases, index


def test_the_real_cases_are_accepted_and_every_typed_field_is_given():
    assert refused(copy.deepcopy(CASES)) is None
    typed = ("traffic", "overlap", "wire_precision", "compute_precision", "baseline")
    for case in CASES:
        assert all(key in case for key in (*typed, "confidence")), case["id"]
        assert case["confidence"] in ("primary", "secondary")


MN1, MN1_10GBE, AWS = "chainermn-mn1-ibfdr-32", "chainermn-mn1-10gbe-32", "chainermn-aws-p3-25g-32"
K80, DGX1V, HOROVOD = "tf-p2-k80-64-resnet50", "dle-pyt-dgx1v-fp32-8", "horovod-512-vgg16"
NVLINK = {"name": "NVLink", "kind": "nvlink"}


@pytest.mark.parametrize(
    ("case_id", "path", "value", "said"),
    [
        (K80, "overlap", "sometimes", "overlap: 'sometimes' is not allowed; allowed: ['buckets'"),
        (K80, "wire_precision", "int8", "wire_precision: 'int8' is not allowed; allowed: ['fp32'"),
        (K80, "compute_precision", "bf16", "compute_precision: 'bf16' is not allowed; allowed:"),
        (K80, "baseline", "one_rack", "baseline: 'one_rack' is not allowed; allowed: ['one_dev"),
        (K80, "confidence", "secondary source", "confidence: 'secondary source' is not allowed"),
        (K80, "traffic", {"kind": "tree"}, "traffic.kind: 'tree' is not allowed; allowed: ["),
        (K80, "traffic", "ring", "traffic.kind: 'ring' is not allowed; allowed: ["),
        (K80, "traffic.servers", 9, "traffic.servers: 9 is not allowed; allowed: a whole numbe"),
        (K80, "traffic.servers", 0, "traffic.servers: 0 is not allowed; allowed: a whole number"),
        (K80, "traffic.per_node", "yes", "traffic.per_node: 'yes' is not allowed; allowed: true"),
        (MN1, "traffic.servers", 2, "traffic.servers: not a key of traffic 'ring_allreduce'"),
        (K80, "parameter_servers", 4, "parameter_servers: not a field of a case here; allowed:"),
        (K80, "intra_node_link.kind", "infiniband", "intra_node_link.kind: 'infiniband' is not"),
        (K80, "intra_node_link", "PCIe", "intra_node_link: 'PCIe' is not allowed; allowed: a map"),
        (K80, "intra_node_link", {"kind": "pcie"}, "intra_node_link.name: missing"),
        (K80, "intra_node_link", {**NVLINK, "nominal_gbyte_s": 150}, "link.nominal_gbyte_s: give"),
        (DGX1V, "intra_node_link.nominal_gbyte_s", -1, "nominal_gbyte_s: -1 is not allowed; allo"),
        (DGX1V, "intra_node_link.nominal_gbyte_s", "fast", "nominal_gbyte_s: 'fast' is not all"),
        (DGX1V, "intra_node_link.nominal_gbyte_s", float("nan"), "nominal_gbyte_s: nan is not a"),
        (DGX1V, "intra_node_link.nominal_gbyte_s", float("inf"), "nominal_gbyte_s: inf is not a"),
        (DGX1V, "intra_node_link.speed", 1, "intra_node_link.speed: not a field of a case here"),
        (MN1, "single_device.borrowed_from", "nobody", "borrowed_from: 'nobody' is not allowed"),
        (MN1, "single_device.borrowed_from", MN1, f"borrowed_from: '{MN1}' is not allowed"),
        (MN1, "single_device.borrowed_from", AWS, f"borrowed_from: '{AWS}' is not allowed"),
        (DGX1V, "single_device.borrowed_from", K80, "borrowed_from: given beside the case's own"),
        (MN1_10GBE, "published.reference", "nobody", "reference: 'nobody' is not allowed; allo"),
        (MN1_10GBE, "published.reference", MN1_10GBE, "reference: 'chainermn-mn1-10gbe-32' is"),
        (MN1_10GBE, "published.reference", K80, f"reference: '{K80}' is not allowed; allowed"),
        (K80, "published.reference", MN1, "published.reference: given where published is 'thr"),
        (K80, "published.value", "lots", "published.value: 'lots' is not allowed where kind is"),
        (MN1, "per_device_batch_phases", [], "per_device_batch_phases: [] is not allowed; allow"),
        (MN1, "per_device_batch_phases", [{"epochs": 30}], "phases[0].batch: missing"),
        (MN1, "per_device_batch_phases", [{"epochs": 0, "batch": 64}], "phases[0].epochs: 0 is"),
        (MN1, "per_device_batch_phases", [{"epochs": 1, "batch": 6.5}], "[0].batch: 6.5 is not"),
        (DGX1V, "baseline", "one_node", "baseline: 'one_node' is not allowed on one node; allow"),
        (K80, "devices_total", 63, "devices_total: 63 is not allowed; allowed: nodes x devices"),
        (K80, "inter_node_link.nominal_gbit_s", None, "inter_node_link.nominal_gbit_s: null is"),
        (K80, "nodes", 0, "nodes: 0 is not allowed; allowed: integer >= 1"),
        (K80, "model", ABSENT, "model: missing; every case gives it"),
    ],
)
def test_a_bad_typed_field_is_one_line_naming_the_case_and_the_field(case_id, path, value, said):
    cases, index = with_field(case_id, path, value)
    message = refused(cases)
    assert message is not None, (path, value)
    assert "\n" not in message and message.startswith(f"{WHERE}: cases[{index}] ({case_id}).")
    assert said in message, message
    assert "allowed" in message or "missing" in message, message


def test_two_cases_with_one_id_are_one_line_naming_the_second():
    cases = copy.deepcopy(CASES)
    cases[3]["id"] = cases[1]["id"]
    message = refused(cases)
    assert message == (
        f"{WHERE}: cases[3].id: '{IDS[1]}' is cases[1]'s too; allowed: an id no other case has"
    )


def test_a_case_without_its_optional_typed_fields_takes_their_defaults():
    cases, index = with_field(K80, "overlap", ABSENT)
    for key in ("traffic", "wire_precision", "compute_precision", "baseline", "confidence"):
        put(cases[index], key, ABSENT)
    assert refused(cases) is None
    fields = case_fields(cases[index])
    defaults = {key: case_schema()["properties"][key]["default"] for key in ("overlap", "baseline")}
    assert (fields.overlap, fields.baseline) == (defaults["overlap"], defaults["baseline"])
    assert fields.traffic.kind == "ring_allreduce" and fields.wire_bytes == 4
    assert (fields.compute_precision, fields.confidence) == ("fp32", "primary")
    assert fields.phases == ((1, cases[index]["per_device_batch"]),)


def with_named(cases: list[dict], index: int) -> list[dict]:
    """The case, then every case it names (its lender, its reference), and theirs."""
    by_id = {case["id"]: case for case in cases}
    found, todo = [cases[index]], [cases[index]]
    while todo:
        fields = case_fields(todo.pop())
        for named in (fields.borrowed_from, fields.reference):
            if named is not None and by_id[named] not in found:
                found.append(by_id[named])
                todo.append(by_id[named])
    return found


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
    st.just(ABSENT),
)


def allowed_or_junk(*allowed: Any) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(allowed), JUNK)


TRAFFIC = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(list(KINDS))},
        optional={
            "servers": st.one_of(st.integers(-1, 10), st.none(), st.text(max_size=3)),
            "per_node": st.one_of(st.booleans(), st.integers(0, 1)),
            "on_workers": st.booleans(),
            "gathers": st.integers(0, 3),
            "rate": st.integers(),
        },
    ),
    JUNK,
)
PHASES = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {"epochs": st.one_of(st.integers(-1, 90), st.floats(0.5, 1e3)), "batch": JUNK}
        ),
        max_size=3,
    ),
    st.lists(
        st.fixed_dictionaries({"epochs": st.integers(1, 90), "batch": st.integers(1, 512)}),
        min_size=1,
        max_size=3,
    ),
    JUNK,
)
RATE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-1, 1000), JUNK)
FIELDS = {
    "traffic": TRAFFIC,
    "overlap": allowed_or_junk("buckets", "after_backward", "delayed"),
    "wire_precision": allowed_or_junk("fp32", "fp16"),
    "compute_precision": allowed_or_junk("fp32", "tf32", "amp"),
    "baseline": allowed_or_junk("one_device", "one_node"),
    "confidence": allowed_or_junk("primary", "secondary"),
    "intra_node_link.kind": allowed_or_junk("nvlink", "pcie", "not_stated"),
    "intra_node_link.nominal_gbyte_s": RATE,
    "intra_node_link.nominal": st.one_of(st.text(max_size=20), JUNK),
    "single_device.borrowed_from": allowed_or_junk(*IDS),
    "published.reference": allowed_or_junk(*IDS),
    "per_device_batch_phases": PHASES,
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(CASES))),
    st.dictionaries(st.sampled_from(sorted(FIELDS)), st.none(), min_size=1, max_size=3).flatmap(
        lambda chosen: st.fixed_dictionaries({path: FIELDS[path] for path in chosen})
    ),
)
def test_any_typed_value_is_accepted_or_one_line_naming_the_case_and_field(index, fuzzed):
    cases = copy.deepcopy(CASES)
    for path, value in fuzzed.items():
        put(cases[index], path, value)
    message = refused(cases)
    if message is None:
        # accepted: the check predicts the case or says why not, never a traceback
        row = check(with_named(cases, index), PROFILES).iloc[0]
        assert row["status"].startswith("predicted") or len(row["reason"]) > 10, row
        return
    case = f"{WHERE}: cases[{index}] ({IDS[index]})."
    assert "\n" not in message and message.startswith(case), (fuzzed, message)
    field = message[len(case) :].split(":")[0]
    tops = {path.split(".")[0] for path in fuzzed}
    assert field.split(".")[0].split("[")[0] in tops, (fuzzed, message)
    assert "allowed" in message or "missing" in message, message
