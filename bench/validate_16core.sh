#!/usr/bin/env bash
# The simulator's per-phase validation on a machine with 16 or more cores (docs/simulation.md, "How far to
# trust it"): every pattern (bench/bench_phases.py's ALGORITHMS) at P = 4 and 8 workers on real cores, one
# rank per core (OMP_NUM_THREADS=1, -bind-to core; MPICH yields, MPIR_CVAR_ENABLE_HEAVY_YIELD=1, only in a
# cell with more ranks than cores), against the same runs simulated on a platform calibrated to this machine
# first (`scaledl netbench` on 2 ranks, `scaledl calibrate --busy cores-1`: the step timed with every core
# busy). Writes, under $OUT (default ./validation-out):
#   phases.json   the raw record (every sample, the platform file's text, commit, machine, load)
#   phases.md     the section to paste into docs/benchmarks.md (or render it: bench_phases.py --render --raw)
#   run.log       what it printed
# About 6-8 minutes on 16 cores. Knobs (environment): WORKERS (default 4,8), ROUNDS (2), WARMUP (5),
# STEPS (20), CALIBRATE (busy; idle: the step timed alone). Extra arguments go to bench_phases.py.
# A smoke test on a small machine: WORKERS=1,2 ROUNDS=1 STEPS=10 bench/validate_16core.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/validation-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
unset MPIR_CVAR_ENABLE_HEAVY_YIELD
cd "$ROOT"
start=$(date +%s)
python bench/bench_phases.py \
    --workers "${WORKERS:-4,8}" --rounds "${ROUNDS:-2}" --warmup "${WARMUP:-5}" --steps "${STEPS:-20}" \
    --calibrate "${CALIBRATE:-busy}" --raw "$OUT/phases.json" --markdown "$OUT/phases.md" \
    --platform-out "$OUT/platform.xml" --workdir "$OUT" --no-doc "$@" 2>&1 | tee "$OUT/run.log"
echo "validate_16core: $(($(date +%s) - start)) s; the table: $OUT/phases.md" | tee -a "$OUT/run.log"
