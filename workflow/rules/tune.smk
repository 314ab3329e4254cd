# The tune stage: every algorithm of a `tuned` block gets the same number of trials (scaledl.grid.tune),
# each a `train` job on a validation split under results/NAME/tune/; this rule picks, per algorithm and
# setting, the trial that reached the validation target in the least training time (a miss counts as
# infinite), and the tuned runs read that choice (workflow/rules/train.smk: tuned_choice).
# A table from JSON files: a local rule, run where Snakemake runs.


localrules:
    tune,


rule tune:
    input:
        trials=TRIAL_FILES,
    output:
        csv=report("results/{name}/tune/chosen.csv", category="Tuning"),
        md="results/{name}/tune/chosen.md",
    log:
        "logs/{name}/tune/chosen.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        protocol=TUNE_PROTOCOL,
    shell:
        "python -m scaledl tune {input.trials} --protocol {params.protocol}"
        " --out-csv {output.csv} --out-md {output.md} > {log} 2>&1"
