# Figures and HTML tables for `snakemake --report`, each with a caption in report/.


rule figures:
    input:
        cells=f"{RESULTS}/tables/cells.csv",
        windows=f"{RESULTS}/tables/windows.csv",
        fits=f"{RESULTS}/tables/fits.csv",
        scaling=f"{RESULTS}/tables/scaling.csv",
    output:
        throughput=report(
            f"{RESULTS}/figures/throughput.png",
            caption="../../report/throughput.rst",
            category="1. Throughput",
            labels={"figure": "throughput vs batch"},
        ),
        speedup=report(
            f"{RESULTS}/figures/speedup.png",
            caption="../../report/speedup.rst",
            category="2. Scaling",
            labels={"figure": "speedup vs devices"},
        ),
        residuals=report(
            f"{RESULTS}/figures/residuals.png",
            caption="../../report/residuals.rst",
            category="1. Throughput",
            labels={"figure": "fit residuals"},
        ),
        frameworks=report(
            f"{RESULTS}/figures/frameworks.png",
            caption="../../report/frameworks.rst",
            category="7. Frameworks",
            labels={"figure": "img/s per strategy"},
        ),
    log:
        f"{RESULTS}/logs/figures.log",
    localrule: True
    shell:
        "$DPSCALE_PYTHON -m dpscale.cli figures --cells {input.cells} --windows {input.windows}"
        " --fits {input.fits} --scaling {input.scaling} --throughput {output.throughput}"
        " --speedup {output.speedup} --residuals {output.residuals}"
        " --frameworks {output.frameworks} > {log} 2>&1"


rule html_tables:
    input:
        cells=f"{RESULTS}/tables/cells.csv",
        fits=f"{RESULTS}/tables/fits.csv",
        scaling=f"{RESULTS}/tables/scaling.csv",
        break_even=f"{RESULTS}/tables/break_even.csv",
        repeatability=f"{RESULTS}/tables/repeatability.csv",
    output:
        fits=report(
            f"{RESULTS}/tables/fits.html",
            caption="../../report/fits.rst",
            category="1. Throughput",
            labels={"table": "throughput-law fits"},
        ),
        scaling=report(
            f"{RESULTS}/tables/scaling.html",
            caption="../../report/scaling.rst",
            category="2. Scaling",
            labels={"table": "speedup and efficiency"},
        ),
        break_even=report(
            f"{RESULTS}/tables/break_even.html",
            caption="../../report/break_even.rst",
            category="2. Scaling",
            labels={"table": "break-even batch"},
        ),
        cells=report(
            f"{RESULTS}/tables/cells.html",
            caption="../../report/cells.rst",
            category="3. Cells",
            labels={"table": "every cell"},
        ),
        repeatability=report(
            f"{RESULTS}/tables/repeatability.html",
            caption="../../report/repeatability.rst",
            category="3. Cells",
            labels={"table": "repeatability"},
        ),
    log:
        f"{RESULTS}/logs/html_tables.log",
    localrule: True
    shell:
        "$DPSCALE_PYTHON -m dpscale.cli html-tables --cells {input.cells} {output.cells}"
        " --fits {input.fits} {output.fits} --scaling {input.scaling} {output.scaling}"
        " --break-even {input.break_even} {output.break_even}"
        " --repeatability {input.repeatability} {output.repeatability} > {log} 2>&1"
