# Every cell -> tidy tables (CSV, loadable with pandas) -> fits, scaling and break-even.


rule aggregate:
    input:
        cell_results(),
    output:
        cells=f"{RESULTS}/tables/cells.csv",
        windows=f"{RESULTS}/tables/windows.csv",
        fits=f"{RESULTS}/tables/fits.csv",
        scaling=f"{RESULTS}/tables/scaling.csv",
        break_even=f"{RESULTS}/tables/break_even.csv",
    log:
        f"{RESULTS}/logs/aggregate.log",
    localrule: True
    params:
        tables=lambda wc, output: Path(output.cells).parent,
    run:
        shell(
            "{PYTHON} -m dpscale.cli aggregate --tables {params.tables} {input} > {log} 2>&1"
        )
