"""Study configuration: the schema, one-line errors for bad input and defaults; the checks
beyond the schema are plan.config_rules, loading and merging files plan.config_files.

Snakemake reads ``--configfile`` itself and says only "Config file is not valid JSON or
YAML" for a syntax error; ``dpscale check-config FILE...`` (dpscale.cli) names the file, line
and column. Both it and the workflow read and merge the study files with plan.config_files
and check them with dpscale.study_check, so they give one verdict.
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema

from dpscale.plan.cluster_file import check_clusters
from dpscale.plan.config_rules import (
    check_combinations,
    check_comm,
    check_cost,
    check_imports,
    check_interpreters,
    check_interventions,
    check_names,
    check_networks,
    check_paths,
    check_predict,
    check_train_layouts,
    check_values,
    dates_as_text,
    node_cpus,
)
from dpscale.plan.env_builds import check_env_variants
from dpscale.plan.errors import ConfigError, UnknownKeyError
from dpscale.plan.gpu_support import check_precision
from dpscale.plan.image_folder import check_image_folder
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.paths import ENVS_DIR, SCHEMA_DIR
from dpscale.plan.published import check_published
from dpscale.plan.remedies import comm_description
from dpscale.plan.shorthand import full_forms
from dpscale.plan.strategy import Strategy
from dpscale.plan.yaml_shape import (
    StrictValidator,
    check_shape,
    field_name,
    float_for_integer,
    load_shipped,
)


@functools.lru_cache(maxsize=4)
def _schema_file(path: Path) -> dict[str, Any]:
    """The schema file, parsed once a process: every study is checked against it (and the
    config fuzz test plans hundreds), and YAML parsing is most of a check."""
    return load_shipped(path)


def config_schema(strategies: Mapping[str, Strategy] | None = None) -> dict[str, Any]:
    """workflow/schemas/config.schema.yaml with the declared remedies in ``comm``'s text
    (plan.remedies.comm_description) and the strategies' own config keys
    (plan.strategy.CellOption) added to its top-level properties."""
    schema = copy.deepcopy(_schema_file(SCHEMA_DIR / "config.schema.yaml"))
    comm = schema["properties"]["comm"]
    comm["description"] = comm_description(comm["description"])
    declared: dict[str, str] = {}
    for strategy in (strategies or {}).values():
        for option in strategy.cell_options:
            if option.name in schema["properties"] and option.name not in declared:
                raise ValueError(f"{strategy.name}: option {option.name!r} is a config key already")
            if option.name in declared and schema["properties"][option.name] != option.schema:
                raise ValueError(
                    f"{strategy.name} and {declared[option.name]} declare option "
                    f"{option.name!r} differently"
                )
            declared[option.name] = strategy.name
            schema["properties"][option.name] = dict(option.schema)
    return schema


def _one_line(error: jsonschema.ValidationError) -> str:
    field = field_name(error.absolute_path)
    as_float = float_for_integer(error)
    if as_float:
        return as_float
    if error.validator == "enum":
        return f"{field}: {error.instance!r} is not allowed; allowed: {error.validator_value}"
    if error.validator in ("oneOf", "anyOf"):
        kinds = [_kind_of(option) for option in error.validator_value]
        return f"{field}: {error.instance!r} is not allowed; allowed: {' or '.join(kinds)}"
    return f"{field}: {error.message}"


def unknown_key(error: jsonschema.ValidationError) -> UnknownKeyError:
    """One line for a key the schema lacks, naming it and the nearest allowed keys
    (``batch_size: unknown key; did you mean batch_sizes?``): a typo's fix, not a list of
    33 keys; all allowed keys only where none is near. The first unknown key is named (a
    second typo is heard of once the first is fixed). study_check adds the file's name."""
    allowed = sorted(error.schema.get("properties", {}))
    key = next(key for key in error.instance if key not in allowed)
    near = difflib.get_close_matches(str(key), allowed, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}?" if near else f"allowed keys: {allowed}"
    where = field_name((*error.absolute_path, str(key)))
    return UnknownKeyError(f"{where}: unknown key; {hint}", (*error.absolute_path, key))


def _kind_of(schema: Mapping[str, Any]) -> str:
    """'a string', 'a list of string', ...: one alternative of a oneOf, in words."""
    kind = schema.get("type", "value")
    if kind == "array":
        return f"a list of {schema.get('items', {}).get('type', 'value')}s"
    return f"a {kind}" if kind != "object" else "a mapping"


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


def check_config(
    config: dict[str, Any], strategies: Mapping[str, Strategy], writes: bool = True
) -> dict[str, Any]:
    """Validate and return the config with defaults filled in; raise ConfigError otherwise.
    The checks that need the matrix run in plan.study.plan_study, which calls this first.

    ``strategies``: the registered strategies (dpscale.registry.STRATEGIES): their names are
    the allowed ones, their own config keys are validated with the schemas they declare.
    ``writes=False``: the study is only read (config_rules.check_paths), so its folders
    need not be writable by this user."""
    check_shape(config)  # first: every check below walks the document
    schema = config_schema(strategies)
    config = dates_as_text(config)
    check_values(config)
    config = full_forms(config, schema)  # 100Gbit, models: [resnet50] (plan.shorthand)
    check_networks(config.get("networks", [HOST_NETWORK]))
    check_predict(config.get("predict"), config.get("networks", [HOST_NETWORK]))
    check_comm(config.get("comm", ["none"]), config.get("networks", [HOST_NETWORK]))
    train = config.get("train")  # not yet checked: a wrong type is the schema's to name
    train_comm = train.get("comm") if isinstance(train, dict) else None
    if train_comm is not None:
        check_comm(train_comm, [HOST_NETWORK], "train.comm")
    # integers as written: 16.0 is not one (plan.yaml_shape.StrictValidator)
    error = jsonschema.exceptions.best_match(StrictValidator(schema).iter_errors(config))
    if error is not None and error.validator == "additionalProperties":
        raise unknown_key(error)
    if error is not None:
        raise ConfigError(_one_line(error))
    filled = _with_defaults(config, schema)
    check_names(filled, sorted(strategies))
    for name in filled["strategies"]:  # the model prices only what a strategy declares
        strategies[name].declared_traffic()
    check_interpreters(filled, sorted({s.env for s in strategies.values()}))
    check_env_variants(filled, built_envs(filled, strategies), ENVS_DIR)
    check_combinations(filled)
    check_precision(filled)
    check_paths(filled, writes)
    check_image_folder(filled, [model["classes"] for model in filled["models"]])
    check_published(filled)
    check_clusters(filled)
    check_imports(filled["imports"])
    check_train_layouts(filled)
    check_cost(filled)
    check_interventions(filled)
    return node_cpus(filled)


def built_envs(config: Mapping[str, Any], strategies: Mapping[str, Strategy]) -> list[str]:
    """The environments dpscale builds for the study: its strategies', less those the config
    runs with a site's own interpreter or container."""
    envs = {strategies[name].env for name in config["strategies"]}
    return sorted(envs - set(config["interpreters"]))
