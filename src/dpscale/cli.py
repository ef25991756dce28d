"""``dpscale``: what a person types. The workflow's rules call ``dpscale.steps`` instead."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# the helpers the commands share (cli_workflow.py), some under the names this module used;
# Snakemake is called through the module (tests replace workflow.call)
from dpscale import cli_workflow as workflow
from dpscale.cli_workflow import DRY_RUN, report_file, study_files, workflow_command
from dpscale.cli_workflow import command_parser as _command
from dpscale.cli_workflow import planned as _planned
from dpscale.cli_workflow import readable as _readable
from dpscale.cli_workflow import study_arguments as _study_arguments


def check_config_files(args: argparse.Namespace) -> None:
    from dpscale.plan.config_rules import node_cpus_words

    config, _ = _planned(args.files, probe=True)
    print(f"dpscale: config ok: {', '.join(map(str, args.files)) or 'config.yaml'}")
    print(f"dpscale: {node_cpus_words(config)}")


def report_path(args: argparse.Namespace) -> None:
    config, _ = _planned(args.files, writes=False)
    print(report_file(config))


def run(args: argparse.Namespace) -> None:
    """The study, then its report (as `make study` does in a checkout)."""
    files = study_files(args)
    _readable(files)
    code = workflow.call(workflow_command(files, args.snakemake_args))
    dry = bool(DRY_RUN & set(args.snakemake_args))  # no figures yet to report
    if code == 0 and not (args.no_report or dry):
        code = workflow.write_report(files, args.snakemake_args)
    raise SystemExit(code)


def report(args: argparse.Namespace) -> None:
    """The study's report (in its results folder, or with --out in a folder this user
    owns); one line, before Snakemake, where the study has no tables yet, or this user may
    not read all of its folder."""
    files = study_files(args)
    config, _ = _planned(files, writes=False)
    folder = workflow.study_folder(config)
    cells = folder / "tables" / "cells.csv"
    blocked = workflow.first_unreadable(folder)
    if blocked:
        raise SystemExit(workflow.cannot_read(blocked, folder))
    if not os.path.isfile(cells):
        named = " ".join(str(f) for f in files) or "(the default study)"
        raise SystemExit(
            f"dpscale: report: study {config['study']} has no tables yet ({cells} is missing): "
            f"dpscale run {named} measures its cells and writes them, then the report"
        )
    raise SystemExit(workflow.write_report(files, args.snakemake_args, args.out))


def lock(args: argparse.Namespace) -> None:
    """``<env>.lock`` from each built environment of the study (its ``pip freeze``)."""
    from dpscale.launch.setup.envs import LockError, env_prefix, lock_path, write_lock
    from dpscale.plan.config import built_envs
    from dpscale.plan.env_builds import env_variants
    from dpscale.registry import STRATEGIES

    config, _ = _planned(study_files(args))
    configured = Path(config["env_locks"]).absolute() if config["env_locks"] else None
    out = args.out.absolute() if args.out else configured
    names = args.env or built_envs(config, STRATEGIES)
    variants = env_variants(config, names)  # one lock per build: torch.cuda13.lock on cuda
    for name in names:
        try:
            prefix = env_prefix(
                name,
                Path(config["env_dir"]).absolute(),
                locks_dir=configured,
                variant=variants[name],
            )
            where = lock_path(name, locks_dir=out, variant=variants[name])
            path = write_lock(name, prefix, where, variant=variants[name])
        except (LockError, FileNotFoundError) as error:
            raise SystemExit(f"dpscale: {error}") from None
        print(f"dpscale: {name}: wrote {path}")
    if out != configured:
        print(f"dpscale: a study builds from these locks with `env_locks: {out}` in its config")


def doctor(args: argparse.Namespace) -> None:
    """The study's environments and this node (or, with --slurm, a compute node) as a table
    to paste into an issue, then one line per problem; exits 1 where there is one."""
    import shlex
    import shutil
    import subprocess

    from dpscale.launch.setup.doctor import doctor as examine
    from dpscale.launch.setup.doctor import srun_command
    from dpscale.registry import STRATEGIES

    files = study_files(args)
    config, _ = _planned(files, writes=False)
    if args.slurm:
        if shutil.which("srun") is None:
            raise SystemExit(
                "dpscale: doctor --slurm: srun is not on PATH here: run it on the cluster's "
                "login node, or run dpscale doctor on a compute node yourself"
            )
        command = srun_command(config, files, args.timeout, os.environ, args.snakemake_args)
        print(f"dpscale: {shlex.join(command)}", flush=True)
        raise SystemExit(subprocess.run(command, check=False).returncode)
    if args.snakemake_args:
        raise SystemExit("dpscale: doctor: the options after -- are srun's: give --slurm too")
    text, problems = examine(config, STRATEGIES, files, args.timeout)
    print(text)
    raise SystemExit(1 if problems else 0)


COMPARE_OUTPUTS = ("ratios", "only", "fits", "links", "sides")


def compare_labels(given: list[str] | None) -> dict[str, str]:
    """``--label A=before B=after`` as ``{"A": "before", "B": "after"}``; one line naming
    the flag for anything else."""
    labels: dict[str, str] = {}
    for item in given or []:
        side, sep, name = item.partition("=")
        if not sep or side.strip().upper() not in ("A", "B") or not name.strip():
            raise SystemExit(
                f"dpscale: compare: --label {item!r}: give A=<name> and/or B=<name>, "
                "for example --label A=h100 B=h200"
            )
        labels[side.strip().upper()] = name.strip()
    return labels


def compare(args: argparse.Namespace) -> None:
    """Two studies' results folders side by side: tables and one page under --out; one
    line, before anything is read, where this user cannot write there or read the tables."""
    out = args.out or Path("results") / "compare" / f"{args.b.name}-vs-{args.a.name}"
    outputs = {name: out / f"{name}.csv" for name in COMPARE_OUTPUTS}
    outputs["html"] = out / "compare.html"
    labels = compare_labels(args.label)
    blocked = workflow.write_blocker(out)
    if blocked:  # before reading: the folders compared may be anyone's, read-only
        raise SystemExit(
            f"dpscale: compare: this user cannot write {out} (it needs write permission on "
            f"{blocked}); --out DIR writes the comparison into a folder you own"
        )
    for side in (args.a, args.b):
        closed = os.path.isdir(side) and not os.access(side, os.R_OK | os.X_OK)
        unreadable = side if closed else workflow.first_unreadable(side / "tables")
        if unreadable:
            raise SystemExit(workflow.cannot_read(unreadable, side))
    try:
        from dpscale.steps.compare import compare as compare_step
    except ImportError as error:  # pandas and matplotlib: the analysis extra
        raise SystemExit(
            f"dpscale: compare needs the analysis extra ({error}): pip install 'dpscale[analysis]'"
        ) from None
    print(compare_step({}, outputs, {"a": args.a, "b": args.b, "labels": labels}))
    print(f"dpscale: wrote {outputs['html']} and its tables")


def predict(args: argparse.Namespace) -> None:
    """A user's cluster predicted from a study's one-device results and its nccl-tests log."""
    try:
        from dpscale.steps.predict import predict as predict_step
    except ImportError as error:  # pandas: the analysis extra
        raise SystemExit(
            f"dpscale: predict needs the analysis extra ({error}): pip install 'dpscale[analysis]'"
        ) from None
    print(
        predict_step(
            args.results,
            args.cluster,
            args.out,
            args.calibrate,
            args.network,
            args.mode,
            args.other_device,
        )
    )


def export_nccl(args: argparse.Namespace) -> None:
    """A study's collectives cells as nccl-tests logs, one per measured layout."""
    try:
        from dpscale.steps.export_nccl import export
    except ImportError as error:  # pandas: the analysis extra
        raise SystemExit(
            f"dpscale: export-nccl needs the analysis extra ({error}): "
            "pip install 'dpscale[analysis]'"
        ) from None
    print(export(args.results, args.out))


def published(args: argparse.Namespace) -> None:
    """A published-cases file checked and predicted, as a study's published-cases step does."""
    try:
        from dpscale.steps.published import published_file
    except ImportError as error:  # pandas and matplotlib: the analysis extra
        raise SystemExit(
            f"dpscale: published needs the analysis extra ({error}): "
            "pip install 'dpscale[analysis]'"
        ) from None
    print(published_file(args.file, args.profile, args.out))


def _published_command(commands) -> None:
    """published: any cases file, outside a study."""
    cases = _command(
        commands,
        "published",
        "example: dpscale published studies/published/cases.yaml --out results/published",
        help="check a published-cases file (one line per bad field) and predict its cases "
        "as a study's report does: the table, its summary, and with --out its page",
    )
    cases.add_argument("file", type=Path, help="a cases file (as studies/published/cases.yaml)")
    cases.add_argument(
        "--profile",
        type=Path,
        help="the bucket timeline the cases borrow (default: the workflow's own)",
    )
    cases.add_argument("--out", type=Path, help="write the table, summary and page here")
    cases.set_defaults(func=published)


def _doctor_command(commands) -> None:
    """doctor: can this node (or a SLURM compute node) run the study?"""
    check = _command(
        commands,
        "doctor",
        "example: dpscale doctor mystudy.yaml     (or: --slurm -- --partition gpu)",
        help="check that this node can run a study: each of its environments probed "
        "(Python, framework versions, GPUs seen, CUDA, cuDNN, NCCL, oneDNN), the node's "
        "GPUs, network interfaces and InfiniBand devices, as a table to paste into an issue, "
        "then one line per problem with what to do (exit code 1 where there is one)",
    )
    _study_arguments(check)
    check.add_argument(
        "--slurm",
        action="store_true",
        help="run it on a compute node with srun, shaped as the study's largest one-process "
        "cell (its GPUs, CPUs, memory; SBATCH_ACCOUNT and SBATCH_PARTITION as the shipped "
        "profile reads them); srun's own options after --",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds each environment's probe may take (default 60)",
    )
    check.set_defaults(func=doctor)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dpscale")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _workflow_commands(commands) -> None:
    """run, report and lock: the workflow from any folder, a checkout's or an installed one."""
    study = _command(
        commands,
        "run",
        "example: dpscale run mystudy.yaml -- --cores 2     (or: -- --profile slurm)",
        help="run a study with dpscale's workflow in this folder, then write its report; "
        "Snakemake's own options after --",
    )
    _study_arguments(study)
    study.add_argument("--no-report", action="store_true", help="run the study only")
    study.set_defaults(func=run)
    page = _command(
        commands,
        "report",
        "example: dpscale report mystudy.yaml     (or: --out ~/reports/mystudy)",
        help="write a study's report (snakemake --report); Snakemake's options after --",
    )
    _study_arguments(page)
    page.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the report to DIR/report.html, Snakemake working in a scratch folder "
        "under DIR, nothing written elsewhere: the report of a results folder you may only read",
    )
    page.set_defaults(func=report)
    locks = _command(
        commands,
        "lock",
        "example: dpscale lock mystudy.yaml --out locks/",
        help="write <env>.lock from the study's built environments (pip freeze)",
    )
    _study_arguments(locks)
    locks.add_argument("--env", action="append", help="only this environment (a name in envs/)")
    locks.add_argument(
        "--out", type=Path, help="the lock files' folder (default: env_locks, else envs/)"
    )
    locks.set_defaults(func=lock)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dpscale")
    parser.add_argument("--version", action="version", version=f"dpscale {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = _command(
        commands,
        "check-config",
        "example: dpscale check-config studies/post003_interconnect_mini.yaml",
        aliases=["check"],
        help="check study files as the workflow does (the same check: merged over "
        "config.yaml, imported logs read, configured interpreters probed)",
    )
    check.add_argument("files", nargs="*", type=Path, help="study files (YAML)")
    check.set_defaults(func=check_config_files)
    where = _command(
        commands,
        "report-path",
        "example: dpscale report-path mystudy.yaml",
        help="where snakemake --report should write this study's report",
    )
    where.add_argument("files", nargs="*", type=Path, help="study files (YAML), as --configfile")
    where.set_defaults(func=report_path)
    both = _command(
        commands,
        "compare",
        "example: dpscale compare results/before results/after --out results/compare",
        help="two studies' results folders side by side (did the upgrade help?)",
    )
    both.add_argument("a", type=Path, help="the reference study's folder (results/<study>)")
    both.add_argument("b", type=Path, help="the study compared with it")
    both.add_argument("--out", type=Path, help="where the tables and compare.html go")
    both.add_argument(
        "--label",
        nargs="+",
        metavar="SIDE=NAME",
        help="what to call each side in the sentences: A=<name> B=<name> "
        "(default: the folders' names, told apart by their parents where they are the same)",
    )
    both.set_defaults(func=compare)
    guess = _command(
        commands,
        "predict",
        "example: dpscale predict --results results/gpu_resnet50 --cluster cluster.yaml",
        help="predict a cluster's scaling from one device's results and its nccl-tests log",
    )
    guess.add_argument("--results", type=Path, required=True, help="results/<study>")
    guess.add_argument("--cluster", type=Path, required=True, help="the cluster file (YAML)")
    guess.add_argument("--out", type=Path, help="write the predictions here (CSV)")
    guess.add_argument(
        "--calibrate",
        type=Path,
        metavar="RESULTS",
        help="a small run's results on this cluster (results/<study>: the same strategy, "
        "model and batch at one node and/or two): fit what the link misses, carry it on",
    )
    guess.add_argument(
        "--network", help="the small run's network to calibrate on, where it measured several"
    )
    guess.add_argument(
        "--mode",
        help="the small run's cells to calibrate on, where it measured both: synthetic, or "
        "folder (the prediction is then for training from its image folder)",
    )
    guess.add_argument(
        "--other-device",
        action="store_true",
        help="predict where the cluster file's device is not the one-device profile's "
        "(every row says so); without it, such a cluster is refused in one line",
    )
    guess.set_defaults(func=predict)
    logs = _command(
        commands,
        "export-nccl",
        "example: dpscale export-nccl --results results/post003_interconnect_mini --out logs/",
        help="write a study's collectives cells as nccl-tests all_reduce_perf logs "
        "(to predict from them as from a cluster's own)",
    )
    logs.add_argument("--results", type=Path, required=True, help="results/<study>")
    logs.add_argument("--out", type=Path, required=True, help="the logs' folder")
    logs.set_defaults(func=export_nccl)
    from dpscale.cli_study import add_commands  # status, rerun-failed, rerun

    add_commands(commands)
    _workflow_commands(commands)
    _published_command(commands)
    _doctor_command(commands)
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, passed = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser.parse_args(ours)
    args.snakemake_args = passed  # after --: Snakemake's own options (run, report, rerun...)
    args.func(args)


if __name__ == "__main__":
    main()
