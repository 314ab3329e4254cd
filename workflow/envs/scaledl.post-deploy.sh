#!/usr/bin/env bash
# Run by `snakemake --sdm conda` inside the new environment of scaledl.yaml, once, after creating it:
# installs the checkout the workflow runs from (SCALEDL_SOURCE, set by workflow/rules/common.smk) in
# editable mode, without dependencies (the environment has them) and without build isolation (nothing
# is downloaded), so `python -m scaledl` in a rule runs this checkout's code.
set -euo pipefail
: "${SCALEDL_SOURCE:?not set: run this through snakemake --sdm conda, whose workflow sets it}"
if [ ! -f "$SCALEDL_SOURCE/pyproject.toml" ]; then
    echo "scaledl post-deploy: $SCALEDL_SOURCE holds no pyproject.toml: point SCALEDL_SOURCE at the checkout" >&2
    exit 1
fi
python -m pip install --quiet --no-deps --no-build-isolation --editable "$SCALEDL_SOURCE"
python -c "import scaledl"
