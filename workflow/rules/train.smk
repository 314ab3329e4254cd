# Stage 2: one MPI job per point of the grid. `-m mpi4py` turns an exception
# on any rank into MPI_Abort, so a failing run ends instead of hanging.
# Resources come from the run's platform (common.smk, scaledl.placement); the
# launcher `mpi` is the one runtime knob: mpiexec here, `srun --mpi=...` from
# slurm/config.yaml. SRUN_CPUS_PER_TASK gives each rank its cores under srun
# (srun no longer inherits --cpus-per-task, and the plugin's job step drops
# SLURM_* variables); other launchers ignore it.


rule train:
    input:
        data="data/hdf5/{dataset}.h5",
    output:
        metrics="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/metrics.csv",
        run="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/run.json",
        model="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/model.pt",
    log:
        "logs/train/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}.log",
    benchmark:
        "benchmarks/train/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}.tsv"
    conda:
        "../envs/scaledl.yaml"
    threads: placed_threads(train_placement)
    resources:
        mpi="mpiexec",  # a cluster swaps in its launcher: see slurm/config.yaml
        **placed_resources(train_placement),
    params:
        out_dir=subpath(output.run, parent=True),
        flags=train_flags,
    shell:
        "SRUN_CPUS_PER_TASK={resources.cpus_per_task} {resources.mpi} -n {resources.tasks}"
        " python -m mpi4py -m scaledl train"
        " --data {input.data} --model {wildcards.model} --algorithm {wildcards.algorithm}"
        " --seed {wildcards.seed} --platform {wildcards.platform} --expect-ranks {resources.tasks}"
        " --out-dir {params.out_dir}"
        " {params.flags} > {log} 2>&1"


# Runs of one rank (one worker, no master) start without a launcher, and MPI
# starts a singleton: the Slurm plugin refuses an MPI job of one task. The
# empty `mpi` makes the plugin submit an ordinary one-task job (it tests the
# value) whose job step runs the command itself instead of under `srun -n1`
# (it tests the key), so no PMI variables of a step reach the singleton.
ruleorder: train_single > train


rule train_single:
    input:
        data="data/hdf5/{dataset}.h5",
    output:
        metrics="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/metrics.csv",
        run="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/run.json",
        model="results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}/model.pt",
    log:
        "logs/train/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}.log",
    benchmark:
        "benchmarks/train/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}.tsv"
    wildcard_constraints:
        workers="1",
        algorithm=SINGLE_RANK_ALGORITHMS,
    conda:
        "../envs/scaledl.yaml"
    threads: placed_threads(train_placement)
    resources:
        mpi="",
        **placed_resources(train_placement),  # tasks is 1 here
    params:
        out_dir=subpath(output.run, parent=True),
        flags=train_flags,
    shell:
        "python -m mpi4py -m scaledl train"
        " --data {input.data} --model {wildcards.model} --algorithm {wildcards.algorithm}"
        " --seed {wildcards.seed} --platform {wildcards.platform} --expect-ranks 1"
        " --out-dir {params.out_dir}"
        " {params.flags} > {log} 2>&1"
