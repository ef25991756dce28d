"""Build hook: the workflow's files travel inside the package as ``dpscale/_workflow``.

They stay at the top of the repository (the Snakefile, config.yaml, workflow/, ...); a
non-editable install copies them beside the code, where ``dpscale.plan.paths`` finds them
(docs/decisions/installed-package.md). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# what `snakemake --snakefile <_workflow>/Snakefile` reads, and the presets beside it
WORKFLOW_FILES = (
    "Snakefile",
    "config.yaml",
    "workflow",
    "envs",
    "report",
    "profiles",
    "studies",
    "slurm",
    # the bucket timelines the published cases borrow (dpscale.plan.published.DEFAULT_PROFILE)
    "evidence/2026-11-27-nvidia-h200/bucket_profiles.csv",
)
INSTALLED_WORKFLOW = "_workflow"  # dpscale.plan.paths.INSTALLED_WORKFLOW


class BuildWithWorkflow(build_py):
    """build_py, then the workflow's files into ``dpscale/_workflow`` of the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout, which has them
        target = Path(self.build_lib) / "dpscale" / INSTALLED_WORKFLOW
        shutil.rmtree(target, ignore_errors=True)  # nothing stale from an earlier build
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in WORKFLOW_FILES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=ignore)
            else:
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithWorkflow})
