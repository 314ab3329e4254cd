"""What a run exchanged, from its run.json: bytes per round, rounds, bytes in all and to the target.

Bytes are counted per worker and per round of communication: one message up (W^i, or ΔW^i for
gradient algorithms) and one down (W, or the reduced ΔW), each of the size the run's codec gives
(4 bytes per value in float32). So synchronous SGD moves 2·4·|W| bytes per step; the averaging
family moves that once every τ steps, or less with --compress; a master-based worker moves
2·4·|W| per exchange with the master. The bytes to reach the target are the rounds up to the
target's evaluation step times the bytes per round (∞ when the target was never reached).
"""

from __future__ import annotations

import math
import statistics


def communication(run: dict) -> dict:
    """bytes_per_exchange, exchanges (per worker, mean), bytes_exchanged and tau of one run.json record."""
    reports = run.get("algorithm_report") or []
    model_bytes = run["model"]["bytes"]
    engine = next((r for r in reports if "bytes_per_exchange" in r), None)
    if engine is not None:
        per_exchange, exchanges = engine["bytes_per_exchange"], engine["exchanges"]
        tau = engine["averaging"]["tau"]
    else:
        per_exchange = 2 * model_bytes
        counts = (
            [r["exchanges"] for r in reports if "exchanges" in r and "worker" in r]
            or [w["exchanges"] for r in reports for w in r.get("workers", [])]
            or [r["exchanges"] for r in reports if "exchanges" in r]
        )
        exchanges = statistics.mean(counts) if counts else None
        tau = 1
    return {
        "bytes_per_exchange": per_exchange,
        "exchanges": exchanges,
        "tau": tau,
        "bytes_exchanged": None if exchanges is None else per_exchange * exchanges,
    }


def rounds_by(step: int, tau: int) -> int:
    """Rounds in the first `step` steps (iterations 0 … step − 1), with a round at every t ≡ 0 mod τ."""
    return (step - 1) // tau + 1 if step > 0 else 0


def bytes_to_target(run: dict) -> float:
    """Bytes a worker exchanged until the step whose evaluation reached the target (∞: not reached)."""
    step = (run.get("evaluation") or {}).get("target_step")
    if run.get("time_to_target_s") is None or step is None:
        return math.inf
    comm = communication(run)
    return rounds_by(step, comm["tau"]) * comm["bytes_per_exchange"]
