"""What Snakemake imports while it parses the workflow: no torch, no MPI.

`runs` expands a config into its training runs, `placement` lays a run out on
its platform, `check` explains a config's mistakes in one line each,
`downloads` maps the raw download lists to the download rule's jobs, and
`schema` writes the workflow schema's `train` blocks from TrainConfig
(`python -m scaledl.grid.schema --write`).
"""
