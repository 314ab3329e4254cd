"""Message codecs for the compressed exchange of the averaging family: what a flat float32 vector becomes on
the wire, and back.

    fp32  4 bytes per value: the vector itself (no codec: the exchange keeps its reductions)
    fp16  2 bytes per value: IEEE half precision (values beyond ±65504 become ±inf; deltas stay far below)
    bf16  2 bytes per value: bfloat16, float32's range with 8 bits of mantissa
    int8  1 byte per value + a 4-byte float32 scale: x ≈ scale·q with q = round(x / scale) in [−127, 127],
          scale = max|x| / 127 (per message). Used with error feedback (the exchange keeps what the
          rounding lost and adds it to the next message), so no update is lost for good, only delayed.

What travels is a difference from a vector both sides already hold (scaledl.algorithms.averaging):
small, centred values, which is what low precision suits. Encoding and decoding run on the host, in
float32; the payload is a uint8 array (MPI moves bytes). No MPI here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

CODECS = ("fp32", "fp16", "bf16", "int8")


@dataclass(frozen=True)
class Codec:
    name: str

    @property
    def compressed(self) -> bool:
        return self.name != "fp32"

    @property
    def error_feedback(self) -> bool:
        """Whether the exchange carries the rounding error over to the next message (int8's large steps)."""
        return self.name == "int8"

    def nbytes(self, numel: int) -> int:
        """Bytes of one message of `numel` values."""
        return {"fp32": 4 * numel, "fp16": 2 * numel, "bf16": 2 * numel, "int8": numel + 4}[self.name]

    def encode(self, x: torch.Tensor, payload: np.ndarray) -> None:
        """x (float32, host) into `payload` (uint8, nbytes(len(x)))."""
        out = torch.from_numpy(payload)
        if self.name == "int8":
            scale = float(x.abs().max()) / 127.0 or 1.0
            out[:4].view(torch.float32)[0] = scale
            out[4:].view(torch.int8).copy_(torch.round(x / scale).clamp_(-127, 127))
        elif self.name in ("fp16", "bf16"):
            out.view(self.dtype).copy_(x)
        else:
            out.view(torch.float32).copy_(x)

    def decode(self, payload: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        """`payload` back into `out` (float32, host); returns `out`."""
        data = torch.from_numpy(payload)
        if self.name == "int8":
            scale = float(data[:4].view(torch.float32)[0])
            return torch.mul(data[4:].view(torch.int8), scale, out=out)
        return out.copy_(data.view(self.dtype if self.name != "fp32" else torch.float32))

    @property
    def dtype(self) -> torch.dtype:
        return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[self.name]


def codec(name: str) -> Codec:
    if name not in CODECS:
        raise ValueError(f"unknown codec {name!r}; choose from {', '.join(CODECS)}")
    return Codec(name)
