"""Rates and delays: one table of units (plan.units) for the config checks, the schema, the
emulated links and the communication model."""

import jsonschema
import pytest

from dpscale.plan.config import config_schema
from dpscale.plan.units import DELAY, RATE, normal_rate, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [("1gbit", 1e9), ("100mbit", 1e8), ("2.5kbit", 2.5e3), ("100us", 1e-4), ("1.5ms", 1.5e-3)],
)
def test_a_quantity_is_bit_per_second_or_seconds(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["10GB", "1 gbit", "gbit", "10gbps", "1e9", ""])
def test_anything_else_names_the_units(text):
    with pytest.raises(ValueError) as error:
        parse_quantity(text)
    assert str(error.value) == (
        f"{text!r} is not a quantity; allowed: a number with one of "
        "['gbit', 'kbit', 'mbit', 'ms', 'us'] (e.g. 10gbit, 50us)"
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("100Gbit", 1e11), ("100GBIT", 1e11), ("10Mbit", 1e7), ("10mBiT", 1e7), ("2Kbit", 2e3)],
)
def test_a_rate_s_unit_is_read_in_any_case(text, value):
    """``bit`` spelled out leaves one meaning (tc's k, m, g), whatever the case."""
    assert parse_quantity(text) == pytest.approx(value)
    assert normal_rate(text) == text.lower() and RATE.match(normal_rate(text))


@pytest.mark.parametrize("text", ["1MS", "1Ms", "50US", "10GB", "10Gbps", "10Gibit"])
def test_a_unit_whose_case_could_change_its_meaning_is_refused(text):
    """``Ms`` could be megaseconds, ``GB`` bytes: no guess, the error names the units."""
    with pytest.raises(ValueError, match="is not a quantity; allowed"):
        parse_quantity(text)
    assert normal_rate(text) == text


def test_the_patterns_take_what_parse_quantity_takes_of_their_kind():
    assert RATE.match("10gbit") and RATE.match("0.5mbit") and not RATE.match("10ms")
    assert DELAY.match("50us") and DELAY.match("1.5ms") and not DELAY.match("1gbit")


def test_the_schema_has_each_pattern_once_and_the_same():
    schema = config_schema()
    assert schema["$defs"]["rate"]["pattern"] == RATE.pattern
    assert schema["$defs"]["delay"]["pattern"] == DELAY.pattern
    assert {RATE.pattern, DELAY.pattern}.isdisjoint(patterns(schema["properties"]))


def patterns(schema):
    """Every ``pattern`` written in a part of the schema."""
    if isinstance(schema, dict):
        own = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
        return own + [p for value in schema.values() for p in patterns(value)]
    if isinstance(schema, list):
        return [p for value in schema for p in patterns(value)]
    return []


def test_the_schema_applies_them_where_it_refers_to_them():
    validator = jsonschema.Draft202012Validator(config_schema())
    predict = {"networks": [{"name": "x", "bandwidth": "10gb", "latency": "1s"}]}
    errors = sorted(validator.iter_errors({"predict": predict}), key=lambda e: list(e.path))
    found = {tuple(e.absolute_path): e.validator for e in errors if e.validator == "pattern"}
    assert found == {
        ("predict", "networks", 0, "bandwidth"): "pattern",
        ("predict", "networks", 0, "latency"): "pattern",
    }
