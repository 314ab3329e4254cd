# The network stage (config `netbench`; `enabled: false` leaves it out of `all`).
# Definitions: scaledl.net.measure, scaledl.report.comm_model.


# α, β, γ and collective bandwidths measured on the allocation of the machine's
# largest synchronous run, an MPI job placed like the training jobs (common.smk:
# platforms differing only in time limit or memory share one measurement).
rule netbench:
    output:
        "results/{name}/netbench/{platform}.json",
    log:
        "logs/{name}/netbench/{platform}.log",
    conda:
        "../envs/scaledl.yaml"
    threads: netbench_threads
    resources:
        mpi="mpiexec",  # a cluster swaps in its launcher: see slurm/config.yaml
        **placed_resources(netbench_placement),
    params:
        flags=netbench_flags,
    shell:
        "SRUN_CPUS_PER_TASK={resources.cpus_per_task} {resources.mpi} -n {resources.tasks}"
        " python -m mpi4py -m scaledl netbench --out {output} {params.flags} > {log} 2>&1"


# The α-β model's communication time per step beside every run's measured one, and a
# weak-scaling extrapolation to the paper's 4253-core point; one table per platform.
rule comm_model:
    input:
        netbench=comm_model_netbench,
        runs=platform_run_files,
    output:
        csv=report("results/{name}/tables/comm_model/{platform}.csv", category="Communication model"),
        md="results/{name}/tables/comm_model/{platform}.md",
        scaling="results/{name}/tables/comm_model/{platform}_scaling.csv",
    log:
        "logs/{name}/aggregate/comm_model_{platform}.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        networks=comm_model_networks,
    shell:
        "python -m scaledl comm-model {input.runs} --netbench {input.netbench} --networks {params.networks}"
        " --out {output.csv} --markdown {output.md} --scaling-out {output.scaling} > {log} 2>&1"
