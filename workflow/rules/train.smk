# Stage 2: one MPI job per point of the grid. `-m mpi4py` turns an exception
# on any rank into MPI_Abort, so a failing run ends instead of hanging.


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
    threads: train_threads
    resources:
        mpi="mpiexec",  # a cluster swaps in its launcher: see slurm/config.yaml
        tasks=train_tasks,
        cpus_per_task=train_cpus_per_task,
        runtime=train_runtime,
    params:
        out_dir=subpath(output.run, parent=True),
        flags=train_flags,
    shell:
        "{resources.mpi} -n {resources.tasks} python -m mpi4py -m scaledl train"
        " --data {input.data} --model {wildcards.model} --algorithm {wildcards.algorithm}"
        " --seed {wildcards.seed} --platform {wildcards.platform} --expect-ranks {resources.tasks}"
        " --out-dir {params.out_dir}"
        " {params.flags} > {log} 2>&1"
