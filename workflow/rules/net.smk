# The network stage (config `netbench`; `enabled: false` leaves it out of `all`).
# Definitions: scaledl.net.measure, scaledl.report.comm_model.


# A table from JSON files, seconds of work: run where Snakemake runs, never queued.
localrules:
    comm_model,


# α, β, γ and collective bandwidths measured on two nodes of the machine (one when
# none of its runs spans more), one core per rank, for as long as its message ladder
# takes over a slow network: what the α-β model needs, not the largest run's
# allocation (scaledl.grid.jobs.netbench_placement, netbench_resources; platforms
# differing only in time limit or memory share one measurement).
rule netbench:
    output:
        "results/{name}/netbench/{platform}.json",
    log:
        "logs/{name}/netbench/{platform}.log",
    conda:
        "../envs/scaledl.yaml"
    container: None  # the ranks start in the image themselves (netbench_launcher)
    threads: netbench_threads
    resources:
        mpi="mpiexec",  # a cluster swaps in its launcher: see slurm/config.yaml
        **NETBENCH_RESOURCES,
    params:
        launcher=netbench_launcher,
        flags=NETBENCH_LOCAL_FLAGS,
    shell:
        "{params.launcher}python -m mpi4py -m scaledl netbench --out {output} {params.flags} > {log} 2>&1"


# A simulated platform's network, measured on the simulation: the same ladder on the
# simulated clock, one process (scaledl.net.measure --platform-file).
ruleorder: netbench_simulated > netbench


rule netbench_simulated:
    input:
        unpack(calibrated_platform),
    output:
        "results/{name}/netbench/{platform}.json",
    log:
        "logs/{name}/netbench/{platform}.log",
    wildcard_constraints:
        platform=SIMULATED_PLATFORMS,
    conda:
        "../envs/scaledl.yaml"
    threads: 1
    resources:
        mpi="",
        **NETBENCH_RESOURCES,
    params:
        platform_file=simulated_platform_file,
        flags=NETBENCH_FLAGS,
    shell:
        "python -m scaledl netbench --platform-file {params.platform_file} --ranks 2 --out {output} {params.flags}"
        " > {log} 2>&1"


# This machine as a simulated platform (platform_file: calibrated), for a twin beside the real runs:
# its network from the local netbench, its compute from the training loop's own step timed here,
# every other core running the same step, as a job's ranks keep them (scaledl.sim.calibrate). The
# code's version is a parameter, so a change to the code recalibrates it; a simulation by other code
# refuses a file calibrated by this one.
rule calibrate_platform:
    input:
        netbench=calibration_netbench,
    output:
        "results/{name}/platform/calibrated.xml",
    log:
        "logs/{name}/platform/calibrated.log",
    conda:
        "../envs/scaledl.yaml"
    threads: os.cpu_count()  # the machine to itself: its step timed with every other core running the same
    params:
        code=code_version(),
        cores=os.cpu_count(),
        busy=os.cpu_count() - 1,
    shell:
        "python -m scaledl calibrate --netbench {input.netbench} --out {output} --name calibrated"
        " --cores {params.cores} --busy {params.busy} > {log} 2>&1"


# The twin against this machine, on what its calibration did not see (scaledl validate --suite here): other
# models' steps measured and priced, netbench's collectives measured and simulated, each row's error and the
# score beside this machine's A/A floor. Timed: the machine to itself, as the calibration.
rule validate_here:
    input:
        platform="results/{name}/platform/calibrated.xml",
        netbench=calibration_netbench,
    output:
        md="results/{name}/validate/here.md",
        json="results/{name}/validate/here.json",
    log:
        "logs/{name}/validate/here.log",
    conda:
        "../envs/scaledl.yaml"
    threads: os.cpu_count()
    params:
        flags=VALIDATE_FLAGS,  # the config's `validate` block: the held-out models, the timings per half
    shell:
        "python -m scaledl validate --suite here --platform-file {input.platform} --netbench {input.netbench}"
        " {params.flags} --out-md {output.md} --out-json {output.json} > {log} 2>&1"


# The shipped platforms against published measurements (scaledl validate --suite published): each row's error,
# and the band each constant was validated to, which the sensitivity sweeps vary it over (config sensitivity.bands).
rule validate_published:
    output:
        md="results/{name}/validate/published.md",
        json="results/{name}/validate/published.json",
    log:
        "logs/{name}/validate/published.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        code=code_version(),
    shell:
        "python -m scaledl validate --suite published --out-md {output.md} --out-json {output.json} > {log} 2>&1"


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
        networks=NETBENCH.networks,
    shell:
        "python -m scaledl comm-model {input.runs} --netbench {input.netbench} --networks {params.networks}"
        " --out {output.csv} --markdown {output.md} --scaling-out {output.scaling} > {log} 2>&1"
