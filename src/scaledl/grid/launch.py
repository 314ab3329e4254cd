"""The prefix that starts an MPI rule's command on its ranks: launcher, memory binding, container, retry.

The train, train_single and netbench rules write `{params.launcher}python -m
mpi4py -m scaledl ...`; workflow/rules/common.smk computes that prefix here from
the job's resources, its platform and how Snakemake runs. A param computed from
resources is no rerun trigger, so none of this reruns a finished job. Pure
functions: no torch, no MPI, no Snakemake.
"""

from __future__ import annotations

import shlex

ATTEMPT_VARIABLE = "SCALEDL_ATTEMPT"  # read by `scaledl train` (scaledl.train.refusal)


def launcher(
    mpi: str,
    tasks: int,
    cpus_per_task: int,
    *,
    oversubscribed: bool = False,
    attempt: int = 1,
    numactl: str | None = None,
    image: str = "",
) -> str:
    """The prefix that starts a command as an MPI job of `tasks` ranks.

    `mpi` is the launcher (the rule's `mpi` resource: mpiexec, or the profile's
    `srun --mpi=...`); empty, there is none, and MPI starts the command as a
    singleton (a one-rank run: the Slurm plugin refuses an MPI job of one task).
    SRUN_CPUS_PER_TASK gives each rank its cores under srun (srun no longer
    inherits --cpus-per-task, and the plugin's job step drops SLURM_* variables);
    other launchers ignore it. `oversubscribed` (a local job of more ranks than
    cores) sets MPICH's yield mode, so that waiting ranks give their core to the
    ones computing.

    `attempt` > 1 (a retry of the job) is passed on as SCALEDL_ATTEMPT, so that a
    run whose earlier attempt was refused with a setting to fix stops at once.
    `numactl` (the platform's options, e.g. --preferred=1 for a KNL's MCDRAM in
    flat mode) prefixes each rank's command. `image` (`apptainer exec ...
    IMAGE`, under --sdm apptainer) runs each rank in the image: srun starts the
    ranks on the host, each in the container (the hybrid model: srun is not in
    the image); any other launcher runs inside the image, with the image's MPI.
    """
    env = f"{ATTEMPT_VARIABLE}={attempt} " if attempt > 1 else ""
    rank = f"{image} " if image else ""
    rank += f"numactl {numactl} " if numactl else ""
    if not mpi:
        return f"{env}{rank}"
    # More ranks than cores: MPICH's busy-polling ranks would take the cores from the ones computing.
    env += "MPIR_CVAR_ENABLE_HEAVY_YIELD=1 " if oversubscribed else ""
    env += f"SRUN_CPUS_PER_TASK={cpus_per_task} "
    if image and not shlex.split(mpi)[0].endswith("srun"):
        return f"{env}{image} {mpi} -n {tasks} {rank.removeprefix(image + ' ')}"
    return f"{env}{mpi} -n {tasks} {rank}"


def container_exec(image: str, *, home: str, gpus: bool, args: str = "") -> str:
    """`apptainer exec` of `image` as Snakemake runs a rule's command in it (its home the working
    directory, the user's --apptainer-args), with --nv for ranks that use GPUs."""
    flags = " ".join(part for part in ("--nv" if gpus else "", args.strip()) if part)
    return f"apptainer exec --home {shlex.quote(home)} {flags + ' ' if flags else ''}{shlex.quote(image)}"
