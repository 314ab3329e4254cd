"""Message codecs for the compressed exchange of the averaging family: what a flat float32 vector becomes on
the wire, and back.

    fp32  4 bytes per value: the vector itself (no codec: the exchange keeps its reductions)
    fp16  2 bytes per value: IEEE half precision (values beyond ±65504 become ±inf; deltas stay far below)
    bf16  2 bytes per value: bfloat16, float32's range with 8 bits of mantissa
    int8  1 byte per value + a 4-byte float32 scale per chunk of INT8_CHUNK values: x ≈ scale·q with
          q = round(x / scale) in [−127, 127], scale = max|x| / 127 over the chunk. The payload is the
          scales, then the values. Used with error feedback where the sender's rounding error would
          otherwise be lost (scaledl.algorithms.averaging), so no update is lost for good, only delayed.

One scale per chunk, not per message: a flat vector of weights spans layers whose values differ by orders
of magnitude, and one scale set by the largest of them rounds most of the others to zero. On LeNet's
one-step differences (431,080 values, 8 tensors) one scale per message lost 9.6 % of the vector (relative
L2 error) and zeroed 27 % of its values; chunks of 4096 values lose 1.3 % and zero 4 %, for 0.1 % more
bytes (one scale per 4096 values). Smaller chunks gain little more (1024: 1.0 %, for 0.4 % more bytes).

What travels is a difference from a vector both sides already hold (scaledl.algorithms.averaging):
small, centred values, which is what low precision suits. Encoding and decoding run on the host, in
float32; the payload is a uint8 array (MPI moves bytes). No MPI here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

CODECS = ("fp32", "fp16", "bf16", "int8")
INT8_CHUNK = 4096  # values per int8 scale (see above)


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
        """Bytes of one message of `numel` values (int8: its scales too)."""
        if self.name == "int8":
            return numel + 4 * chunks(numel)
        return {"fp32": 4, "fp16": 2, "bf16": 2}[self.name] * numel

    def encode(self, x: torch.Tensor, payload: np.ndarray) -> None:
        """x (float32, host) into `payload` (uint8, nbytes(len(x)))."""
        out = torch.from_numpy(payload)
        if self.name == "int8":
            scales, values = _int8_parts(out, len(x))
            for part, q, scale in zip(_by_chunk(x), _by_chunk(values), _by_rows(scales, len(x))):
                torch.amax(part.abs(), dim=1, out=scale).div_(127.0)
                scale.masked_fill_(scale == 0, 1.0)  # an all-zero chunk: any scale, q = 0
                q.copy_(torch.round(part / scale[:, None]).clamp_(-127, 127))
        elif self.name in ("fp16", "bf16"):
            out.view(self.dtype).copy_(x)
        else:
            out.view(torch.float32).copy_(x)

    def decode(self, payload: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        """`payload` back into `out` (float32, host); returns `out`."""
        data = torch.from_numpy(payload)
        if self.name == "int8":
            scales, values = _int8_parts(data, len(out))
            for q, into, scale in zip(_by_chunk(values), _by_chunk(out), _by_rows(scales, len(out))):
                torch.mul(q, scale[:, None], out=into)
            return out
        return out.copy_(data.view(self.dtype if self.name != "fp32" else torch.float32))

    @property
    def dtype(self) -> torch.dtype:
        return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[self.name]


def chunks(numel: int) -> int:
    """int8 scales in a message of `numel` values."""
    return -(-numel // INT8_CHUNK)


def _int8_parts(payload: torch.Tensor, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An int8 payload's scales (float32, first: aligned) and values (int8)."""
    head = 4 * chunks(numel)
    return payload[:head].view(torch.float32), payload[head : head + numel].view(torch.int8)


def _by_chunk(t: torch.Tensor) -> list[torch.Tensor]:
    """`t` as (whole chunks × INT8_CHUNK) and (1 × the rest) views, without copying."""
    whole = len(t) // INT8_CHUNK * INT8_CHUNK
    parts = [t[:whole].view(-1, INT8_CHUNK)] if whole else []
    return parts + ([t[whole:].view(1, -1)] if whole < len(t) else [])


def _by_rows(scales: torch.Tensor, numel: int) -> list[torch.Tensor]:
    """The scales of `_by_chunk`'s parts of a vector of `numel` values."""
    whole = numel // INT8_CHUNK
    parts = [scales[:whole]] if whole else []
    return parts + ([scales[whole:]] if whole < len(scales) else [])


def codec(name: str) -> Codec:
    if name not in CODECS:
        raise ValueError(f"unknown codec {name!r}; choose from {', '.join(CODECS)}")
    return Codec(name)
