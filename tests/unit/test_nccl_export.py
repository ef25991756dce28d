"""dpscale's collectives cells exported as nccl-tests logs read back through the import a
cluster's own log takes, to the same times (issue 50: the import-to-prediction path checked
on links measured here)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.analysis.results.import_logs import parse_all_reduce, read_lines
from dpscale.analysis.results.nccl_export import export_logs

REPO = Path(__file__).resolve().parents[2]
MEASURED = REPO / "evidence/2026-11-25-nvidia-h200/cpu16_torch_ddp_one_node/tables/collectives.csv"


def test_each_layout_becomes_one_log_that_reads_back_to_its_times(tmp_path):
    table = pd.read_csv(MEASURED)
    written = export_logs(table, tmp_path, "cpu16_torch_ddp_one_node")
    assert sorted(p.name for p in written) == [
        f"torch-ddp_host_none_n1-d{n}.log" for n in (2, 4, 8)
    ]
    for path in written:
        ranks = int(path.stem.rsplit("-d", 1)[1])
        log = parse_all_reduce(read_lines(path), ranks)
        assert log.ranks_listed == ranks and not log.validated
        rows = table[table["world_size"] == ranks].sort_values("message_bytes")
        assert [r.message_bytes for r in log.rows] == list(rows["message_bytes"])
        # nccl-tests prints microseconds to two decimals
        assert [r.time_us for r in log.rows] == pytest.approx(list(rows["time_s"] * 1e6), abs=0.006)
        curve = CollectiveCurve.from_log(log, ranks)
        middle = rows.iloc[len(rows) // 2]
        assert curve.seconds(int(middle["message_bytes"]), ranks).seconds == pytest.approx(
            middle["time_s"], rel=1e-3, abs=1e-8
        )


def test_imported_rows_and_single_ranks_are_not_exported(tmp_path):
    table = pd.read_csv(MEASURED)
    table.loc[table["world_size"] == 4, "source"] = "imported: some.log"
    table.loc[table["world_size"] == 8, "world_size"] = 1
    written = export_logs(table, tmp_path, "s")
    assert [p.name for p in written] == ["torch-ddp_host_none_n1-d2.log"]


def test_the_command_writes_the_logs_and_names_a_folder_without_collectives(tmp_path, capsys):
    from dpscale.cli import main

    tables = tmp_path / "study" / "tables"
    tables.mkdir(parents=True)
    (tables / "collectives.csv").write_text(MEASURED.read_text())
    main(["export-nccl", "--results", str(tmp_path / "study"), "--out", str(tmp_path / "logs")])
    assert len(list((tmp_path / "logs").glob("*.log"))) == 3
    assert capsys.readouterr().out.count("dpscale: wrote ") == 3
    with pytest.raises(SystemExit) as stopped:
        main(["export-nccl", "--results", str(tmp_path / "none"), "--out", str(tmp_path / "x")])
    assert str(stopped.value).startswith("dpscale: export-nccl: ") and "\n" not in str(
        stopped.value
    )
