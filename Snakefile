# scaledl: the EASGD family of You, Buluç & Demmel (SC'17) as a pipeline.
#
#   raw data --prepare--> data/hdf5/{dataset}.h5
#            --train (MPI, one job per grid point)--> results/NAME/runs/.../{metrics.csv,run.json}
#            --aggregate--> results/NAME/tables/summary.{csv,md}  --plot--> results/NAME/plots/*.png
#   (NAME: the config's `name`, else its file name: each config has its own results)
#
# Run: snakemake --cores 2                      (laptop, config/config.yaml)
#      snakemake --profile slurm                (cluster, see slurm/config.yaml)
#      snakemake --cores 2 --configfile config/test.yaml   (seconds, synthetic data)


from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# `snakemake --report results/NAME/report.html`: the workflow's description and every figure's caption.
report: "workflow/report/workflow.rst"


# common.smk validates the config against workflow/schemas/config.schema.yaml,
# expands the experiment grid (scaledl.grid.runs) and defines every getter the rules
# below call.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
