# The report's figures (listed in scaledl.report.catalogue, drawn by
# scaledl.report.figures) and the long metrics table, in one job: every run's
# run.json and metrics.csv in, one PNG per figure out. A figure whose runs this
# config does not have is written as a placeholder that says so, so every output
# below always exists; the job's log names them. With the network stage on, the
# scaling figure adds the α-β model's efficiency for each platform, from its
# machine's netbench file (common.smk: NETBENCH, scaledl.grid.rules.NetbenchPlan). A local rule, like the
# tables: under --profile slurm it runs where Snakemake runs.


localrules:
    figures,


rule figures:
    input:
        runs=RUN_FILES,
        metrics=METRICS_FILES,  # read beside each run.json
        netbench=NETBENCH.files(),
    output:
        # One PNG per figure of scaledl.report.catalogue, captioned by workflow/report/NAME.rst.
        **{
            figure.name: report(
                f"results/{{name}}/report/figures/{figure.name}.png",
                caption=f"../report/{figure.caption}",
                category="Figures",
                subcategory=figure.subcategory,
            )
            for figure in CATALOGUE
        },
        metrics=report("results/{name}/report/metrics_long.csv", caption="../report/metrics_long.rst",
                       category="Tables"),
    log:
        "logs/{name}/report/figures.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        netbench=NETBENCH.flags(),
        out_dir=subpath(output[0], parent=True),
    shell:
        "python -m scaledl figures --runs {input.runs} {params.netbench} --out-dir {params.out_dir}"
        " --metrics-out {output.metrics} > {log} 2>&1"


# Optional (config `regime_map`): where a claim holds over network bandwidth × device speed,
# simulated on the scaled platform from the steps to target of this config's runs of both
# sides (scaledl.report.regime). It runs simulations: a job of its own, on this machine's CPU.
rule regime_map:
    input:
        unpack(regime_platform),  # platform_file calibrated: this machine's twin first (net.smk)
        data=regime_data,
        runs=REGIME_RUNS,
    output:
        png=report("results/{name}/report/regime/map.png", caption="../report/regime_map.rst", category="Figures"),
        csv="results/{name}/report/regime/map.csv",
        md="results/{name}/report/regime/map.md",
    log:
        "logs/{name}/report/regime_map.log",
    conda:
        "../envs/scaledl.yaml"
    threads: 2
    params:
        flags=regime_flags,
        out_dir=subpath(output.png, parent=True),
    shell:
        "python -m scaledl regime-map --data {input.data} --runs {input.runs} {params.flags} --jobs {threads}"
        " --out-dir {params.out_dir} > {log} 2>&1"


# Optional (config `sensitivity`): for each claim pair FASTER-vs-SLOWER, whether its simulated
# verdict survives each assumed platform constant varied alone (efficiency, per-operation
# overhead, PCIe and network bandwidth, memory bandwidth, noise), from this config's runs of
# both sides (scaledl.report.sensitivity); the claims report shows it beside the verdict.
rule sensitivity:
    input:
        unpack(sensitivity_inputs),  # the calibrated platform where it is one; the validated bands (sensitivity.bands)
        data=sensitivity_data,
        runs=sensitivity_runs,
    output:
        csv="results/{name}/report/sensitivity/{pair}/sensitivity.csv",
        md="results/{name}/report/sensitivity/{pair}/sensitivity.md",
        points="results/{name}/report/sensitivity/{pair}/points.csv",
    log:
        "logs/{name}/report/sensitivity/{pair}.log",
    wildcard_constraints:
        pair="[a-z0-9_]+-vs-[a-z0-9_]+",
    conda:
        "../envs/scaledl.yaml"
    threads: 2
    params:
        flags=sensitivity_flags,
        out_dir=subpath(output.csv, parent=True),
    shell:
        "python -m scaledl sensitivity --data {input.data} --runs {input.runs} {params.flags} --jobs {threads}"
        " --out-dir {params.out_dir} > {log} 2>&1"
