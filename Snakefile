# scaledl: the EASGD family of You, Buluç & Demmel (SC'17) as a pipeline.
#
#   urls --download--> data/raw/{dataset}/ --prepare--> data/hdf5/{dataset}.h5                     data.smk
#     --train (MPI, a job per tune trial on a validation split)--> results/NAME/tune/.../run.json  train.smk
#     --tune_round (the grid's edges: a round more, wider)--> results/NAME/tune/round{N}.json    tune.smk
#     --tune_confirm (each cell's best two points, on more seeds)--> results/NAME/tune/confirm.json tune.smk
#     --tune (each algorithm's best point)--> results/NAME/tune/chosen.{csv,md}                   tune.smk
#     --train (MPI, a job per grid point x seed)--> results/NAME/runs/.../{metrics.csv,run.json}   train.smk
#     --train_simulated (a simulated platform: one process, every rank an actor)--> the same       train.smk
#     --aggregate (a job per table)--> results/NAME/tables/{summary,scaling,averaging}.{csv,md}   report.smk
#     --plot_accuracy_vs_time--> results/NAME/plots/accuracy_vs_time.png                           report.smk
#   largest run's allocation --netbench--> results/NAME/netbench/{platform}.json                   net.smk
#   a simulated platform --netbench_simulated--> results/NAME/netbench/{platform}.json             net.smk
#   the local netbench --calibrate_platform--> results/NAME/platform/calibrated.xml (a twin of this machine) net.smk
#     --validate_here (its prices against this machine, held out)--> results/NAME/validate/here.md net.smk
#     + runs --comm_model--> results/NAME/tables/comm_model/{platform}.{csv,md}                    net.smk
#   summary + netbench --claims--> results/NAME/report/claims.{md,csv}                             report.smk
#   runs + netbench --figures--> results/NAME/report/figures/*.png, metrics_long.csv               figures.smk
#   runs on a simulated platform --regime_map (if configured)--> results/NAME/report/regime/map.*   figures.smk
#     --sensitivity (if configured)--> results/NAME/report/sensitivity/A-vs-B/*, beside the claims  figures.smk
#   the shipped platforms --validate_published--> results/NAME/validate/published.json (the bands swept)  net.smk
#   (NAME: the config's `name`, else its file name: each config has its own results)
#
# Run: snakemake --cores 2                      (laptop, config/config.yaml)
#      snakemake --profile slurm                (cluster, see slurm/config.yaml)
#      snakemake --cores 2 --configfile config/test.yaml   (seconds, synthetic data)
#      scaledl cost --configfile config/cluster.yaml   (the node-hours and GPU-hours it asks of Slurm)


from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# `snakemake --report results/NAME/report.html`: the workflow's description and every figure's caption.
report: "workflow/report/workflow.rst"


# common.smk validates the config against workflow/schemas/config.schema.yaml,
# expands the experiment grid (scaledl.grid) and defines every getter the rules
# below call.
include: "workflow/rules/common.smk"


# `snakemake --sdm apptainer` runs every rule in this image (common.smk: IMAGE, built from
# workflow/envs/scaledl.def); inert otherwise. `--sdm conda` uses workflow/envs/scaledl.yaml instead.
container: IMAGE


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/net.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        final_outputs(),


# After a run that succeeded, its last line: where the claims and figures are (and whether it was a smoke test).
onsuccess:
    logger.info(grid_rules.finished_line(NAME, RUNS))
