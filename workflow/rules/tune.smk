# The tune stage: every algorithm of a `tuned` block gets the same trials, the points of one η grid
# (scaledl.grid.tune), each a `train` job per trial seed on a validation split under results/NAME/tune/.
# Round 0 runs the base grid; a round whose best η sits at an edge of the grid for some cell names a next
# round, one factor wider on that side (a checkpoint: the DAG grows when its result exists), up to
# tune.extend a side. The last round's trials name each cell's best point and runner-up, which run again on
# the confirmation's seeds (a checkpoint too); with them they give the choice, which the tuned runs read
# (workflow/rules/train.smk: tuned_choice). Tables from JSON files: local rules, run where Snakemake runs.


localrules:
    tune_round,
    tune_confirm,
    tune,


checkpoint tune_round:
    wildcard_constraints:
        round=r"\d+",
    input:
        trials=tune_trials,
    output:
        "results/{name}/tune/round{round}.json",
    log:
        "logs/{name}/tune/round{round}.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        protocol=TUNE_PROTOCOL,
    shell:
        "python -m scaledl tune {input.trials} --protocol {params.protocol} --out-round {output} > {log} 2>&1"


checkpoint tune_confirm:
    input:
        trials=tune_trials,
    output:
        "results/{name}/tune/confirm.json",
    log:
        "logs/{name}/tune/confirm.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        protocol=TUNE_PROTOCOL,
    shell:
        "python -m scaledl tune {input.trials} --protocol {params.protocol} --out-confirm {output} > {log} 2>&1"


rule tune:
    input:
        trials=confirmed_trials,
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
