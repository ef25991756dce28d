"""Count how the cells of the exit-abort loop ended (benchmarks/exit_loop_study.yaml): per
strategy, the statuses and the cells whose log shows a process aborting at exit (SIGABRT,
"terminate called", a core dump) even when the cell itself read ok.

    .venv/bin/python benchmarks/exit_loop.py results/exit_loop
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ABORT = re.compile(
    r"terminate called|Aborted|core dumped|SIGABRT|signal 6|exit code -6|exitcode -6|code 134",
    re.IGNORECASE,
)


def main(study: Path) -> None:
    statuses: dict[str, Counter] = defaultdict(Counter)
    aborts: dict[str, list[str]] = defaultdict(list)
    for result_path in sorted((study / "cells").rglob("*.json")):
        result = json.loads(result_path.read_text())
        strategy = result["cell"]["strategy"]
        statuses[strategy][result["status"]] += 1
        log = study / "logs" / "cells" / result_path.relative_to(study / "cells")
        text = (
            log.with_suffix(".log").read_text(errors="replace")
            if log.with_suffix(".log").is_file()
            else ""
        )
        found = ABORT.search(text)
        if found:
            aborts[strategy].append(f"{result['cell']['cell_id']}: {found.group(0)}")
    for strategy in sorted(statuses):
        counts = dict(statuses[strategy])
        found = len(aborts[strategy])
        print(f"{strategy}: {sum(counts.values())} cells {counts}; exit aborts in logs: {found}")
        for line in aborts[strategy]:
            print(f"  {line}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/exit_loop"))
