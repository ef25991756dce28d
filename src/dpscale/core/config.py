"""Study configuration: one-line errors for bad input, defaults, and cross-field rules."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import jsonschema
import yaml

from dpscale.core.paths import SCHEMA_DIR
from dpscale.core.resnet_spec import DEPTHS


class ConfigError(ValueError):
    """A bad study configuration; the message is one line naming the field."""


def config_schema() -> dict[str, Any]:
    with open(SCHEMA_DIR / "config.schema.yaml", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _field_name(path: Iterable[Any]) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "<config>"


def _one_line(error: jsonschema.ValidationError) -> str:
    field = _field_name(error.absolute_path)
    if error.validator == "enum":
        return f"{field}: {error.instance!r} is not allowed; allowed: {error.validator_value}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{field}: {error.message}; allowed keys: {allowed}"
    return f"{field}: {error.message}"


def _with_defaults(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    filled = copy.deepcopy(config)
    for key, sub in schema.get("properties", {}).items():
        if key not in filled and "default" in sub:
            filled[key] = copy.deepcopy(sub["default"])
        if isinstance(filled.get(key), dict) and sub.get("type") == "object":
            filled[key] = _with_defaults(filled[key], sub)
        if isinstance(filled.get(key), list) and isinstance(sub.get("items"), dict):
            filled[key] = [
                _with_defaults(item, sub["items"]) if isinstance(item, dict) else item
                for item in filled[key]
            ]
    return filled


def check_config(config: dict[str, Any], strategy_names: Iterable[str]) -> dict[str, Any]:
    """Validate and return the config with defaults filled in; raise ConfigError otherwise."""
    schema = config_schema()
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(config)
    )
    if error is not None:
        raise ConfigError(_one_line(error))
    filled = _with_defaults(config, schema)
    _check_names(filled, sorted(strategy_names))
    _check_combinations(filled)
    return filled


def _check_names(config: dict[str, Any], strategies: list[str]) -> None:
    named = (
        ("strategies", config["strategies"]),
        ("train.strategies", config["train"]["strategies"] or []),
    )
    for field, names in named:
        for index, name in enumerate(names):
            if name not in strategies:
                raise ConfigError(
                    f"{field}[{index}]: {name!r} is not allowed; allowed: {strategies}"
                )
    for field, models in (
        ("models", config["models"]),
        ("train.models", config["train"]["models"]),
    ):
        for index, model in enumerate(models):
            if model["name"] not in DEPTHS:
                raise ConfigError(
                    f"{field}[{index}].name: {model['name']!r} is not allowed; "
                    f"allowed: {sorted(DEPTHS)}"
                )
    keys = [(m["name"], m["stem"], m["image_size"], m["classes"]) for m in config["models"]]
    if len(set(keys)) != len(keys):
        raise ConfigError(
            "models: the same model (name, stem, image_size, classes) is listed twice"
        )


def _check_combinations(config: dict[str, Any]) -> None:
    if config["accelerator"] == "cpu" and config["precision"] != "fp32":
        raise ConfigError(
            f"precision: {config['precision']!r} needs accelerator 'cuda'; allowed on cpu: ['fp32']"
        )
    measure = config["measure"]
    if measure["max_windows"] is not None and measure["max_windows"] < measure["windows"]:
        raise ConfigError(
            f"measure.max_windows: {measure['max_windows']} is less than measure.windows "
            f"({measure['windows']})"
        )
    if measure["max_windows"] is not None and measure["target_ci"] is None:
        raise ConfigError("measure.max_windows: only used with measure.target_ci; set both")
