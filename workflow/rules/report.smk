# Stage 3: read every run.json / metrics.csv (never logs) into tables, a plot and the claims
# (the network stage is net.smk, the report's figures figures.smk).
# Seconds of pandas and matplotlib each: under --profile slurm they run where Snakemake runs
# (local rules), not as queued jobs.


localrules:
    aggregate,
    plot_accuracy_vs_time,
    claims,


# One job per table of `scaledl aggregate` (scaledl.report.tables.TABLES, named in scaledl.report.catalogue):
# summary (a row per run), scaling (weak and strong scaling efficiency of every sweep over worker counts,
# scaledl.report.scaling) and averaging (the averaging family side by side: bytes exchanged, accuracy, time
# to target and the slowdown a straggler causes, scaledl.report.averaging; empty when no run has them).
rule aggregate:
    input:
        runs=RUN_FILES,
    output:
        csv=report("results/{name}/tables/{table}.csv", category="Summary"),
        md="results/{name}/tables/{table}.md",
    log:
        "logs/{name}/aggregate/{table}.log",
    wildcard_constraints:
        table=TABLES,
    conda:
        "../envs/scaledl.yaml"
    shell:
        "python -m scaledl aggregate {input.runs} --table {wildcards.table} --out {output.csv} --markdown {output.md}"
        " > {log} 2>&1"


rule plot_accuracy_vs_time:
    input:
        metrics=METRICS_FILES,
        runs=RUN_FILES,  # labels come from here
    output:
        report("results/{name}/plots/accuracy_vs_time.png", category="Figures"),
    log:
        "logs/{name}/plot/accuracy_vs_time.log",
    conda:
        "../envs/scaledl.yaml"
    # x is training time, the clock of time_to_target_s in the summary
    shell:
        "python -m scaledl plot {input.metrics} --x train_s --out {output} > {log} 2>&1"


# The paper's claims, each with our number, its spread and n, and a verdict
# (holds / does not hold / not comparable here, with the reason); the claims and
# their rules are data, in scaledl/report/claims.yaml.
rule claims:
    input:
        summary="results/{name}/tables/summary.csv",
        netbench=NETBENCH.files(),
        sensitivity=SENSITIVITY_FILES,
        chosen=CHOSEN_FILES,  # the tune stage's choice: each tuned side says which η decided it
    output:
        md=report("results/{name}/report/claims.md", category="Claims"),
        csv="results/{name}/report/claims.csv",
    log:
        "logs/{name}/report/claims.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        flags=CLAIMS_FLAGS,
        sensitivity=SENSITIVITY_FLAGS,
        chosen=CHOSEN_FLAGS,
    shell:
        "python -m scaledl claims --summary {input.summary} {params.flags} {params.sensitivity}"
        " {params.chosen} --out-md {output.md} --out-csv {output.csv} > {log} 2>&1"
