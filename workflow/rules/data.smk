# Stage 1: raw dataset -> one HDF5 file per dataset (layout in scaledl.data.hdf5).


rule prepare:
    input:
        raw=prepare_input,
    output:
        "data/hdf5/{dataset}.h5",
    log:
        "logs/prepare/{dataset}.log",
    conda:
        "../envs/scaledl.yaml"
    params:
        flags=prepare_flags,
    shell:
        "python -m scaledl prepare {wildcards.dataset} --out {output} {params.flags} > {log} 2>&1"
