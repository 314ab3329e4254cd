# The report's figures (scaledl.report.figures) and the long metrics table, in
# one job: every run's run.json and metrics.csv in, one PNG per figure out. A
# figure whose runs this config does not have is written as a placeholder that
# says so, so every output below always exists; the job's log names them.
# With the network stage on, the scaling figure adds the α-β model's efficiency
# for each platform, from its machine's netbench file (common.smk, figures_netbench).

rule figures:
    input:
        runs=run_files("run.json"),
        metrics=run_files("metrics.csv"),  # read beside each run.json
        netbench=figures_netbench_files,
    output:
        fig6_1=report("results/{name}/report/figures/fig6_1.png", caption="../report/fig6_1.rst",
                      category="Figures", subcategory="Accuracy vs time"),
        fig6_2=report("results/{name}/report/figures/fig6_2.png", caption="../report/fig6_2.rst",
                      category="Figures", subcategory="Accuracy vs time"),
        fig6_3=report("results/{name}/report/figures/fig6_3.png", caption="../report/fig6_3.rst",
                      category="Figures", subcategory="Accuracy vs time"),
        fig6_4=report("results/{name}/report/figures/fig6_4.png", caption="../report/fig6_4.rst",
                      category="Figures", subcategory="Accuracy vs time"),
        fig8=report("results/{name}/report/figures/fig8.png", caption="../report/fig8.rst",
                    category="Figures", subcategory="Accuracy vs time"),
        ladder_breakdown=report("results/{name}/report/figures/ladder_breakdown.png",
                                caption="../report/ladder_breakdown.rst", category="Figures",
                                subcategory="Time breakdown"),
        scaling=report("results/{name}/report/figures/scaling.png", caption="../report/scaling.rst",
                       category="Figures", subcategory="Scaling"),
        chip_partition=report("results/{name}/report/figures/chip_partition.png",
                              caption="../report/chip_partition.rst", category="Figures",
                              subcategory="Chip partitioning"),
        averaging=report("results/{name}/report/figures/averaging.png", caption="../report/averaging.rst",
                         category="Figures", subcategory="Averaging family"),
        metrics=report("results/{name}/report/metrics_long.csv", caption="../report/metrics_long.rst",
                       category="Tables"),
    log:
        "logs/{name}/report/figures.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        netbench=figures_netbench,
        out_dir=subpath(output.fig8, parent=True),
    shell:
        "python -m scaledl figures --runs {input.runs} {params.netbench} --out-dir {params.out_dir}"
        " --metrics-out {output.metrics} > {log} 2>&1"
