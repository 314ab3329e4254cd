# Stage 1: raw dataset -> one HDF5 file per dataset (layout in scaledl.data.hdf5).
# Datasets with a download list (datasets.<name>.download) get their raw files from
# the download rule (scaledl.grid.downloads); the others read whatever the raw folder holds.
# A plug-in dataset (config `plugins.datasets`) is prepared by its own converter, or has no
# prepare job when it has none: its file is put in place by hand (scaledl.grid.plugins).


# Where Snakemake runs: cluster compute nodes often have no route to the internet.
localrules:
    download,


# One job per file. A file put in place by hand is taken as done; prepare checks
# its sha256 before converting (verify_raw).
rule download:
    output:
        "{rawdir}/{filename}",
    log:
        "logs/download/{rawdir}/{filename}.log",
    wildcard_constraints:
        **DOWNLOAD_CONSTRAINTS,
    conda:
        "../envs/scaledl.yaml"
    params:
        dataset=download_dataset,
        sources=download_sources,
    shell:
        "python -m scaledl download {params.dataset} {wildcards.filename:q} --out-dir {wildcards.rawdir:q} "
        "{params.sources} > {log} 2>&1"


rule prepare:
    input:
        raw=prepare_input,
    output:
        "data/hdf5/{dataset}.h5",
    log:
        "logs/prepare/{dataset}.log",
    wildcard_constraints:
        dataset=PREPARED_DATASETS,  # a plug-in dataset without a converter has its file put in place by hand
    conda:
        "../envs/scaledl.yaml"
    # Cores, memory and time limit follow from the dataset (common.smk, scaledl.grid.jobs.prepare_resources).
    threads: prepare_threads
    resources:
        **PREPARE_RESOURCES,
    params:
        verify_raw=verify_raw,
        flags=prepare_flags,
    shell:
        "({params.verify_raw}python -m scaledl prepare {wildcards.dataset} --out {output} {params.flags}) > {log} 2>&1"
