"""A published case's typed fields (config ``published_cases.cases``; the workflow's own
file is studies/published/cases.yaml, its README says what each field means): checked
before any job, and parsed once, with their defaults, for the published check.

The schema (workflow/schemas/published_cases.schema.yaml) gives each field's type and
allowed values; the rules across fields and cases are here (an id a case names exists,
parameter servers no more than nodes, ...). Each problem is one line naming the case and
the field. The cases' words (framework, precision, relative_to, notes, quotes,
assumptions) are documentation: nothing here or in the check decides anything from them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from dpscale.plan import traffic
from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import SCHEMA_DIR
from dpscale.plan.yaml_shape import (
    StrictValidator,
    field_name,
    float_for_integer,
    load_shipped,
    shown,
)

SCHEMA_FILE = "published_cases.schema.yaml"

# overlap: when a step's all-reduces run
BUCKETS, AFTER_BACKWARD, DELAYED = "buckets", "after_backward", "delayed"
# baseline: what a published figure is measured against
ONE_DEVICE, ONE_NODE = "one_device", "one_node"
# published.kind of a figure compared as a ratio of times (with a reference)
TIME_TO_TRAIN = "time_to_train"
# bytes of one gradient value on the wire, per wire_precision
WIRE_BYTES = {"fp32": 4, "fp16": 2}
SECONDARY = "secondary"


@functools.lru_cache(maxsize=1)
def case_schema() -> dict[str, Any]:
    """The schema of one case, parsed once a process."""
    return load_shipped(SCHEMA_DIR / SCHEMA_FILE)


def _default(name: str) -> Any:
    return case_schema()["properties"][name]["default"]


@dataclass(frozen=True)
class IntraNodeLink:
    """The link inside one node: its kind (nvlink, pcie, not_stated), its nominal rate in
    bytes/s per direction (None: none assumed) and that rate's source in words."""

    kind: str
    bytes_s: float | None
    words: str
    name: str


@dataclass(frozen=True)
class CaseFields:
    """What the published check reads from one case, every default filled in."""

    traffic: traffic.Traffic
    overlap: str
    wire_precision: str
    compute_precision: str
    baseline: str
    intra: IntraNodeLink
    borrowed_from: str | None
    reference: str | None
    phases: tuple[tuple[float, int], ...]  # (epochs, per-device batch)
    confidence: str

    @property
    def wire_bytes(self) -> int:
        return WIRE_BYTES[self.wire_precision]


def case_fields(case: Mapping[str, Any]) -> CaseFields:
    """One checked case's typed fields (check_cases first: a wrong value here is a bug)."""
    intra = case["intra_node_link"]
    rate = intra.get("nominal_gbyte_s")
    phases = case.get("per_device_batch_phases") or [
        {"epochs": 1, "batch": case["per_device_batch"]}
    ]
    return CaseFields(
        traffic=traffic.from_dict(case.get("traffic", _default("traffic")), "traffic"),
        overlap=case.get("overlap", _default("overlap")),
        wire_precision=case.get("wire_precision", _default("wire_precision")),
        compute_precision=case.get("compute_precision", _default("compute_precision")),
        baseline=case.get("baseline", _default("baseline")),
        intra=IntraNodeLink(
            intra["kind"],
            None if rate is None else rate * 1e9,
            intra.get("nominal", ""),
            intra["name"],
        ),
        borrowed_from=case["single_device"].get("borrowed_from"),
        reference=case["published"].get("reference"),
        phases=tuple((phase["epochs"], phase["batch"]) for phase in phases),
        confidence=case.get("confidence", _default("confidence")),
    )


def check_cases(cases: Any, where: str) -> None:
    """A list of cases each matching the schema, then the rules across fields and cases;
    ConfigError with one line, ``{where}: cases[i] (id).field: ...; allowed: ...`` (the
    first of case_problems)."""
    problems = case_problems(cases, where)
    if problems:
        raise ConfigError(problems[0])


def case_problems(cases: Any, where: str) -> list[str]:
    """Every problem of the cases, one line per bad field (``dpscale published`` prints
    them all): ids first, then each case against the schema and finite, then, where every
    case is well typed, the rules across fields and cases (a rule reads other cases'
    fields, so it needs them typed); empty where the cases are good."""
    if not isinstance(cases, list) or not cases:
        return [f"{where} has no list of cases; allowed: a list of one or more"]
    problems = _id_problems(cases, where)
    validator = StrictValidator(case_schema())  # 16.0 is not an integer
    for index, case in enumerate(cases):
        if not isinstance(case, dict) or not isinstance(case.get("id"), str) or not case["id"]:
            continue  # said above
        label = f"{where}: cases[{index}] ({shown(case['id'])})"
        errors = list(validator.iter_errors(case))
        problems += [f"{label}.{_one_line(error)}" for error in _per_field(errors)]
        if not errors:
            problems += _problem(lambda case=case, label=label: _finite(case, label))
    if problems:
        return problems
    by_id = {case["id"]: case for case in cases}
    for index, case in enumerate(cases):
        label = f"{where}: cases[{index}] ({shown(case['id'])})"
        problems += _problem(lambda case=case, label=label: _check_rules(case, by_id, label))
    return problems


def _id_problems(cases: list[Any], where: str) -> list[str]:
    """Each case without an id or with another case's."""
    problems, seen = [], {}
    for index, case in enumerate(cases):
        if not isinstance(case, dict) or not isinstance(case.get("id"), str) or not case["id"]:
            problems.append(f"{where}: cases[{index}] has no id; every case needs one")
        elif case["id"] in seen:
            problems.append(
                f"{where}: cases[{index}].id: {case['id']!r} is cases[{seen[case['id']]}]'s "
                "too; allowed: an id no other case has"
            )
        else:
            seen[case["id"]] = index
    return problems


def _per_field(errors: list[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """The schema's errors of one case, the most relevant per top-level field, the most
    relevant of all first (what check_cases has always said first)."""
    if not errors:
        return []
    best = jsonschema.exceptions.best_match(errors)
    fields: dict[Any, list[jsonschema.ValidationError]] = {}
    for error in errors:
        fields.setdefault(_top_field(error), []).append(error)
    others = [
        jsonschema.exceptions.best_match(group)
        for field, group in fields.items()
        if field != _top_field(best)
    ]
    return [best, *others]


def _top_field(error: jsonschema.ValidationError) -> Any:
    """The case's field an error lies in (a missing field: the one it names)."""
    if error.absolute_path:
        return error.absolute_path[0]
    if error.validator == "required":
        return error.message.split("'")[1]
    return None


def _problem(check: Callable[[], None]) -> list[str]:
    """The one line a check raises, or none."""
    try:
        check()
    except ConfigError as error:
        return [str(error)]
    return []


def _one_line(error: jsonschema.ValidationError) -> str:
    """A schema error as ``field: what is wrong; allowed: ...``, the field dotted below the
    case (``intra_node_link.kind``)."""
    field = field_name(error.absolute_path)
    as_float = float_for_integer(error)
    if as_float:
        return as_float
    if error.validator == "required":
        missing = error.message.split("'")[1]
        name = f"{field}.{missing}" if error.absolute_path else missing
        return f"{name}: missing; every case gives it (studies/published/README.md)"
    if error.validator == "dependentRequired":
        given = next(k for k, needs in error.validator_value.items() if k in error.instance)
        needs = error.validator_value[given]
        return f"{field}.{given}: given without {needs}; allowed: with {needs} beside it"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        name = f"{field}.{shown(str(extra[0]))}" if error.absolute_path else shown(str(extra[0]))
        return f"{name}: not a field of a case here; allowed: {sorted(error.schema['properties'])}"
    return f"{field}: {_shown(error.instance)} is not allowed; allowed: {_allowed(error.schema)}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _allowed(schema: Mapping[str, Any]) -> str:
    """A field's schema in words: its values, or its type and bounds."""
    if "enum" in schema:
        return str(schema["enum"])
    kinds = schema.get("type", "any value")
    words = " or ".join(kinds) if isinstance(kinds, list) else str(kinds)
    words = words.replace("object", "a mapping").replace("array", "a list")
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">")):
        if key in schema:
            words += f" {sign} {schema[key]}"
    if "minItems" in schema:
        words += f" of at least {schema['minItems']} item(s)"
    if "minLength" in schema:
        words += " of at least one character"
    if "properties" in schema and schema.get("required"):
        words += f" with keys {schema['required']}"
    return words


def _finite(value: Any, where: str, path: tuple[Any, ...] = ()) -> None:
    """No NaN or infinity anywhere in a case: the schema's bounds let NaN through (NaN <= 0
    is false), and no published rate, time or count is infinite."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{where}.{field_name(path)}: {value!r} is not allowed; allowed: a finite number"
        )
    if isinstance(value, dict | list):
        for key, child in value.items() if isinstance(value, dict) else enumerate(value):
            _finite(child, where, (*path, key))


def _check_rules(case: Mapping[str, Any], by_id: Mapping[str, Any], where: str) -> None:
    """What the schema cannot say: fields that must agree with each other or name a case."""
    nodes, per_node = case["nodes"], case["devices_per_node"]
    if case["devices_total"] != nodes * per_node:
        raise ConfigError(
            f"{where}.devices_total: {case['devices_total']!r} is not allowed; allowed: nodes "
            f"x devices_per_node = {nodes * per_node}"
        )
    declared = traffic.from_dict(case.get("traffic", _default("traffic")), f"{where}.traffic")
    servers = getattr(declared, "servers", None)
    if servers is not None and servers > nodes:
        raise ConfigError(
            f"{where}.traffic.servers: {servers!r} is not allowed; allowed: a whole number "
            f"from 1 to the case's nodes ({nodes}), or null (a shard on every device)"
        )
    if nodes > 1 and case["inter_node_link"]["nominal_gbit_s"] is None:
        raise ConfigError(
            f"{where}.inter_node_link.nominal_gbit_s: null is not allowed where nodes > 1; "
            "allowed: the link's nominal rate in Gbit/s"
        )
    if case.get("baseline") == ONE_NODE and nodes < 2:
        raise ConfigError(
            f"{where}.baseline: 'one_node' is not allowed on one node; allowed: "
            f"{ONE_DEVICE!r} (or one_node where nodes >= 2)"
        )
    published = case["published"]
    if published["kind"] != TIME_TO_TRAIN and not isinstance(published["value"], int | float):
        raise ConfigError(
            f"{where}.published.value: {_shown(published['value'])} is not allowed where kind "
            f"is {published['kind']!r}; allowed: a number (words only for {TIME_TO_TRAIN!r})"
        )
    _check_borrowed(case, by_id, where)
    _check_reference(case, by_id, where)


def _check_borrowed(case: Mapping[str, Any], by_id: Mapping[str, Any], where: str) -> None:
    lender_id = case["single_device"].get("borrowed_from")
    if lender_id is None:
        return
    field = f"{where}.single_device.borrowed_from"
    if case["single_device"].get("img_s") is not None:
        raise ConfigError(
            f"{field}: given beside the case's own img_s; allowed: only where img_s is null"
        )
    lender = by_id.get(lender_id)
    if lender is None or lender is case or lender["single_device"].get("img_s") is None:
        raise ConfigError(
            f"{field}: {lender_id!r} is not allowed; allowed: the id of another case with a "
            f"one-device img_s: {sorted(_lenders(by_id, case))}"
        )


def _lenders(by_id: Mapping[str, Any], case: Mapping[str, Any]) -> list[str]:
    return [
        key
        for key, other in by_id.items()
        if other is not case and other["single_device"].get("img_s") is not None
    ]


def _check_reference(case: Mapping[str, Any], by_id: Mapping[str, Any], where: str) -> None:
    published = case["published"]
    reference_id = published.get("reference")
    if reference_id is None:
        return
    field = f"{where}.published.reference"
    if not _a_time(case):
        raise ConfigError(
            f"{field}: given where published is {published['kind']!r} "
            f"{published['value']!r}; allowed: only with kind {TIME_TO_TRAIN!r} and a number"
        )
    reference = by_id.get(reference_id)
    if reference is None or reference is case or not _a_time(reference):
        times = [key for key, other in by_id.items() if other is not case and _a_time(other)]
        raise ConfigError(
            f"{field}: {reference_id!r} is not allowed; allowed: the id of another case "
            f"whose published figure is a {TIME_TO_TRAIN} number: {sorted(times)}"
        )


def _a_time(case: Mapping[str, Any]) -> bool:
    published = case["published"]
    value = published["value"]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return published["kind"] == TIME_TO_TRAIN and number


def references(cases: Sequence[Mapping[str, Any]]) -> set[str]:
    """The ids other cases' time ratios divide by."""
    return {case["published"]["reference"] for case in cases if case["published"].get("reference")}
