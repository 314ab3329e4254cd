# Stage 3: read every run.json / metrics.csv (never logs) into tables and figures.
# Ordinary jobs: under --profile slurm they are submitted like the others.


rule aggregate:
    input:
        runs=run_files("run.json"),
    output:
        csv=report("results/tables/summary.csv", category="Summary"),
        md="results/tables/summary.md",
    log:
        "logs/aggregate/summary.log",
    conda:
        "../envs/scaledl.yaml"
    shell:
        "python -m scaledl aggregate {input.runs} --out {output.csv} --markdown {output.md} > {log} 2>&1"


# Weak and strong scaling efficiency of every sweep over worker (node) counts;
# the definitions are in scaledl.report.scaling.
rule scaling:
    input:
        runs=run_files("run.json"),
    output:
        csv=report("results/tables/scaling.csv", category="Summary"),
        md="results/tables/scaling.md",
    log:
        "logs/aggregate/scaling.log",
    conda:
        "../envs/scaledl.yaml"
    shell:
        "python -m scaledl aggregate {input.runs} --table scaling --out {output.csv} --markdown {output.md} > {log} 2>&1"


rule plot_accuracy_vs_time:
    input:
        metrics=run_files("metrics.csv"),
        runs=run_files("run.json"),  # labels come from here
    output:
        report("results/plots/accuracy_vs_time.png", category="Figures"),
    log:
        "logs/plot/accuracy_vs_time.log",
    conda:
        "../envs/scaledl.yaml"
    # x is training time, the clock of time_to_target_s in the summary
    shell:
        "python -m scaledl plot {input.metrics} --x train_s --out {output} > {log} 2>&1"
