"""Where the repository's own files are, for code that runs from any environment."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
ENVS_DIR = REPO_ROOT / "envs"
SRC_DIR = REPO_ROOT / "src"
