"""`python -m snakemake ARGS`, with the Slurm executor plugin's status checks at a steady pace.

The plugin waits 10 s longer before each status check that finds no job finished (up to 180 s): right for
a busy cluster's scheduler, but on the tests' one-node cluster, whose jobs take seconds, a job that ends
just after a check waits tens of seconds to be seen, and each stage of the workflow waits again. Here the
wait between checks stays at `--seconds-between-status-checks`. Nothing else changes: the same sbatch
submissions, status queries and job states.
"""

from __future__ import annotations

import asyncio

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor


async def _steady_sleep(self) -> None:
    await asyncio.sleep(self.workflow.remote_execution_settings.seconds_between_status_checks)


if __name__ == "__main__":
    Executor.sleep = _steady_sleep
    main()
