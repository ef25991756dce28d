"""Short forms a study may write, read as their full forms before any check, so that every
check, the cells and tc see one spelling:

- a rate's unit in any case: ``rate: 100Gbit`` is ``100gbit`` (plan.units says why only a
  rate's unit: ``Ms`` could be megaseconds);
- a shared ResNet by its bare name: ``models: [resnet50]`` is ``[{name: resnet50}]``, whose
  stem, image_size and classes the schema's defaults then fill as for any entry. Any other
  bare name (a zoo's model, a name in ``train.models``, whose defaults are the training
  data's) is one line showing the mapping to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpscale.plan.errors import ConfigError
from dpscale.plan.resnet_spec import DEPTHS
from dpscale.plan.units import normal_rate

# where a rate may be written: (list of entries, the entry's key)
RATE_FIELDS = ((("networks",), "rate"), (("predict", "networks"), "bandwidth"))
MODEL_KEYS = ("name", "stem", "image_size", "classes")


def full_forms(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its short forms written out (a copy where a list was read); a bare
    model name that is not a shared ResNet is a ConfigError naming the entry."""
    for path, key in RATE_FIELDS:
        config = _with_entries(config, path, lambda entry, _, key=key: _rate(entry, key))
    items = schema["properties"]["models"]["items"]
    config = _with_entries(config, ("models",), lambda entry, where: _model(entry, where, items))
    train_items = schema["properties"]["train"]["properties"]["models"]["items"]
    return _with_entries(
        config, ("train", "models"), lambda entry, where: _not_bare(entry, where, train_items)
    )


def _with_entries(
    config: dict[str, Any], path: tuple[str, ...], form: Callable[[Any, str], Any]
) -> dict[str, Any]:
    """``config`` with each entry of the list at ``path`` replaced by ``form(entry, where)``;
    the config itself where the list is absent (or not a list: the schema names that)."""
    parent: Any = config
    for key in path[:-1]:
        parent = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(parent, dict) or not isinstance(parent.get(path[-1]), list):
        return config
    field = ".".join(path)
    entries = [form(entry, f"{field}[{index}]") for index, entry in enumerate(parent[path[-1]])]
    return _replaced(config, path, entries)


def _replaced(config: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``config`` with ``value`` at ``path`` (the mappings on the way copied)."""
    if len(path) == 1:
        return {**config, path[0]: value}
    return {**config, path[0]: _replaced(config[path[0]], path[1:], value)}


def _rate(entry: Any, key: str) -> Any:
    """A network entry with its rate's unit in lower case (``100Gbit``: ``100gbit``)."""
    if not isinstance(entry, dict) or key not in entry:
        return entry
    return {**entry, key: normal_rate(entry[key])}


def _model(entry: Any, where: str, items: dict[str, Any]) -> Any:
    """A bare shared ResNet name as ``{name: ...}``; any other bare name one line."""
    if isinstance(entry, str) and entry in DEPTHS:
        return {"name": entry}
    return _not_bare(entry, where, items, tuple(DEPTHS))


def _not_bare(entry: Any, where: str, items: dict[str, Any], bare: tuple[str, ...] = ()) -> Any:
    """The entry unchanged, unless it is a bare name not in ``bare`` (the names a bare
    entry may be): then one line showing the mapping to write."""
    if not isinstance(entry, str):
        return entry
    names = f"one of {list(bare)} or " if bare else ""
    raise ConfigError(
        f"{where}: {entry[:100]!r} is not a model entry; allowed: {names}a mapping, e.g. "
        f"{mapping_example(entry[:100], items)}"
    )


def mapping_example(name: str, items: dict[str, Any]) -> str:
    """``{name: resnet50, stem: imagenet, image_size: 224, classes: 1000}``: a model entry
    with the schema's defaults, as a study writes it."""
    defaults = [f"{key}: {items['properties'][key].get('default')}" for key in MODEL_KEYS[1:]]
    return "{" + ", ".join([f"name: {name}", *defaults]) + "}"
