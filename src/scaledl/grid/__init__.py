"""What Snakemake imports while it parses the workflow: no torch, no MPI; one module per concern.

`keys` names a training run and spells the one run-folder template; `runs`
expands a config into its training runs (blocks, sweeps, the tune stage's
trials, and the checks the schema cannot make); `jobs` sizes each job (a
run's placement, the train, netbench and prepare resources); `rules` gives the
workflow's rules their wildcard patterns, file lists and command-line options;
`regime` the regime map's part; `sensitivity` the sensitivity sweeps'; `preflight` the checks that stop the workflow
before anything runs (the config, slurm_extra, the Slurm partitions). Beside
them: `placement` lays a run out on its platform, `fit` checks a Slurm request
against sinfo's nodes, `nodehours` is `scaledl cost`, `launch` the MPI
prefix, `tune` the trials, `check` explains a config's mistakes in one line
each, `downloads` maps the raw download lists to the download rule's jobs,
`plugins` the config's own models and datasets, and `schema` writes the
workflow schema's `train` blocks from TrainConfig
(`python -m scaledl.grid.schema --write`).
"""
