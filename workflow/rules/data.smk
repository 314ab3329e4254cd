# Stage 1: raw dataset -> one HDF5 file per dataset (layout in scaledl.data.hdf5).
# Datasets with a download list (datasets.<name>.download) get their raw files from
# the download rule; the others read whatever the raw folder holds.


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
        **download_wildcard_constraints(),
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
    conda:
        "../envs/scaledl.yaml"
    # What a prepare job asks for follows from its dataset (scaledl.grid.runs.prepare_resources): ImageNet's
    # `workers` decoding processes are its cores, and its time limit grows with the images each decodes.
    threads: lambda wildcards: grid.prepare_threads(config["datasets"][wildcards.dataset])
    resources:
        **{
            name: lambda wildcards, name=name: grid.prepare_resources(
                wildcards.dataset, config["datasets"][wildcards.dataset]
            )[name]
            for name in grid.PREPARE_RESOURCES
        },
    params:
        verify_raw=verify_raw,
        flags=prepare_flags,
    shell:
        "({params.verify_raw}python -m scaledl prepare {wildcards.dataset} --out {output} {params.flags}) > {log} 2>&1"
