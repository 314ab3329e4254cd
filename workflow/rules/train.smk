# Stage 2: one MPI job per point of the grid. `-m mpi4py` turns an exception
# on any rank into MPI_Abort, so a failing run ends instead of hanging. Its
# folder, log and benchmark follow the one run-folder template
# (scaledl.grid.keys: RUN_DIR, RUN_LOG, RUN_BENCHMARK).
# Resources come from the run's platform (common.smk, scaledl.grid.jobs); the
# launcher `mpi` is the one runtime knob: mpiexec here, `srun --mpi=...` from
# slurm/config.yaml (set-resources of the rule named `train`). The command
# starts with `{mpi} -n {tasks} ` (params.launcher, common.smk's mpi_launcher:
# also the platform's numactl, and under --sdm apptainer the image each rank
# runs in, so the rule itself has `container: None`), and --expect-ranks
# {tasks} fails a job whose launcher did not start one MPI world of that many
# ranks (a launcher that starts singletons).
#
# A job that exits 2 (a setting to fix) is retried by the profile's `retries`
# like any failure: Snakemake and its Slurm plugin cannot tell exit statuses
# apart. The retry's `scaledl train` sees its attempt (SCALEDL_ATTEMPT, from
# mpi_launcher) and the refusal the earlier attempt left in the run's folder,
# and stops at once with the same line (scaledl.train.refusal).
#
# Every file the run writes is an output, so a failed or interrupted job
# (`scaledl train` exits 130 after Ctrl-C or SIGTERM, with partial results)
# leaves none of them behind to look complete: Snakemake deletes them and
# runs that job again. A diverged run exits 0: its files, with
# stop.reason "diverged", are the evidence the tables show.


rule train:
    input:
        data="data/hdf5/{dataset}.h5",
        chosen=tuned_choice,  # a tuned run reads its settings from the tune stage's choice
    output:
        metrics=f"{RUN_DIR}/metrics.csv",
        run=f"{RUN_DIR}/run.json",
        model=f"{RUN_DIR}/model.pt",
        timeline=f"{RUN_DIR}/timeline.h5",
    log:
        RUN_LOG,
    benchmark:
        RUN_BENCHMARK
    conda:
        "../envs/scaledl.yaml"
    container: None  # the ranks start in the image themselves (mpi_launcher)
    threads: train_threads
    priority: train_priority  # tune trials by η, largest first: the hopeless ones then stop early
    resources:
        mpi="mpiexec",  # a cluster swaps in its launcher: see slurm/config.yaml
        **TRAIN_RESOURCES,
    params:
        launcher=mpi_launcher,
        out_dir=subpath(output.run, parent=True),
        flags=train_flags,
        tuned=tuned_flags,
    shell:
        "{params.launcher}python -m mpi4py -m scaledl train"
        " --data {input.data} --model {wildcards.model} --algorithm {wildcards.algorithm}"
        " --seed {wildcards.seed} --platform {wildcards.platform} --expect-ranks {resources.tasks}"
        " --out-dir {params.out_dir}"
        " {params.flags} {params.tuned} > {log} 2>&1"


# Runs of one rank (one worker, no master) start without a launcher, and MPI
# starts a singleton: the Slurm plugin refuses an MPI job of one task. The
# empty `mpi` makes the plugin submit an ordinary one-task job (it tests the
# value) whose job step runs the command itself instead of under `srun -n1`
# (it tests the key), so no PMI variables of a step reach the singleton; it
# also empties params.launcher. `use rule ... with:` replaces a directive it
# names as a whole (resources too: they are repeated), keeps the others (the
# command, the outputs), and gives the rule its own name, so the profile's
# launcher for `train` never reaches it.
use rule train as train_single with:
    wildcard_constraints:
        workers="1",
        algorithm=SINGLE_RANK_ALGORITHMS,
    resources:
        mpi="",
        **TRAIN_RESOURCES,  # tasks is 1 here


# Runs on a simulated platform (kind simulated; docs/simulation.md): one process simulates
# every rank as a SimGrid actor on a host of the platform (`scaledl simulate`, the same
# options as `scaledl train`), so the job is one task on this machine's CPU whatever its
# ranks, and no launcher starts it. Its times are the platform's simulated seconds
# (run.json's `transport`); the tables and claims keep them apart from measured ones.
ruleorder: train_simulated > train_single > train


rule train_simulated:
    input:
        unpack(calibrated_platform),  # platform_file calibrated: this machine's twin, calibrated first (net.smk)
        data="data/hdf5/{dataset}.h5",
        chosen=tuned_choice,
    output:
        metrics=f"{RUN_DIR}/metrics.csv",
        run=f"{RUN_DIR}/run.json",
        model=f"{RUN_DIR}/model.pt",
        timeline=f"{RUN_DIR}/timeline.h5",
    log:
        RUN_LOG,
    benchmark:
        RUN_BENCHMARK
    wildcard_constraints:
        platform=SIMULATED_PLATFORMS,
    conda:
        "../envs/scaledl.yaml"
    threads: train_threads
    priority: train_priority  # tune trials by η, largest first: the hopeless ones then stop early
    resources:
        mpi="",
        **TRAIN_RESOURCES,  # tasks is 1: one process
    params:
        out_dir=subpath(output.run, parent=True),
        simulation=simulation_flags,  # --platform-file, --ranks, and --clock where not SimGrid's
        flags=train_flags,
        tuned=tuned_flags,
    shell:
        "python -m scaledl simulate {params.simulation}"
        " --data {input.data} --model {wildcards.model} --algorithm {wildcards.algorithm}"
        " --seed {wildcards.seed} --platform {wildcards.platform} --out-dir {params.out_dir}"
        " {params.flags} {params.tuned} > {log} 2>&1"
