"""``dpscale``: what a person types. The workflow's rules call ``dpscale.steps`` instead."""

from __future__ import annotations

import argparse
from pathlib import Path


def check_config_files(args: argparse.Namespace) -> None:
    """config.yaml, then each study file over it, as the workflow merges them."""
    from dpscale.plan.config import load_yaml, merged
    from dpscale.plan.errors import ConfigError
    from dpscale.plan.paths import REPO_ROOT
    from dpscale.plan.study import plan_study
    from dpscale.registry import STRATEGIES

    config: dict = {}
    try:
        for path in [REPO_ROOT / "config.yaml", *args.files]:
            config = merged(config, load_yaml(path))
        plan_study(config, STRATEGIES)
    except ConfigError as error:
        raise SystemExit(f"dpscale: config error: {error}") from None
    print(f"dpscale: config ok: {', '.join(map(str, args.files)) or 'config.yaml'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dpscale")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check-config", help="check study files as the workflow merges them over config.yaml"
    )
    check.add_argument("files", nargs="*", type=Path, help="study files (YAML)")
    check.set_defaults(func=check_config_files)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
