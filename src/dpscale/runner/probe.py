"""Can this interpreter run these strategies' ranks? Asked once per configured interpreter,
before any job (dpscale.launch.setup.interpreters runs it with the configured command).

    python -m dpscale.runner.probe ADAPTER_MODULE...

Prints one line, ``DPSCALE-PROBE {json}``: the interpreter, its Python and framework
versions, the container it runs in, and ``error`` when an import fails or a version is one
dpscale cannot drive (the adapters' ``requires``).
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
from typing import Any

from dpscale.plan.strategy import required_module, unmet
from dpscale.runner.sysinfo import container

PREFIX = "DPSCALE-PROBE "
MIN_PYTHON = (3, 11)  # datetime.UTC, and the versions the adapters are tested with


def probe(adapters: list[str]) -> dict[str, Any]:
    report: dict[str, Any] = {
        "python_executable": sys.executable,
        "python": platform.python_version(),
        "versions": {},
        "container": container(),
    }
    if sys.version_info < MIN_PYTHON:
        report["error"] = f"Python {report['python']} is too old (dpscale's runner needs >= 3.11)"
        return report
    try:
        for name in adapters:
            adapter = importlib.import_module(name)
            adapter.framework.require()
            for requirement in adapter.STRATEGY.requires:
                report["error"] = _check(requirement, report["versions"])
                if report["error"]:
                    return report
    except Exception as error:  # noqa: BLE001 (whatever fails is what the user must see)
        report["error"] = f"{type(error).__name__}: {error}"
    return report


def _check(requirement: str, versions: dict[str, str]) -> str | None:
    module = required_module(requirement)
    version = str(getattr(importlib.import_module(module), "__version__", "unknown"))
    versions[module] = version
    return unmet(requirement, version)


def main() -> None:
    print(PREFIX + json.dumps(probe(sys.argv[1:]), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
