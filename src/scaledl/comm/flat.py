"""All parameters of a model as views into one contiguous tensor.

The paper's "single-layer communication" (§3 technique 1): instead of one
message per layer, every parameter is a view into one flat buffer, so an
exchange is one message of |W| words. Gradients get the same treatment, and
backward accumulates straight into the flat gradient buffer. `layer_views`
keeps the per-parameter split for the per-layer ablation.

A worker with nothing to send (one worker) needs no flat gradient, and
keeping one costs a zeroing and an accumulating pass over |W| every step
that a plain PyTorch loop does not pay: `release_grads` hands the gradients
back to autograd, and `pairs` lets an elementwise rule run view by view.
"""

from __future__ import annotations

import torch
from torch import nn


class FlatParams:
    """Re-points every parameter (and its .grad) of `module` at slices of two flat tensors."""

    def __init__(self, module: nn.Module, pin_memory: bool = False):
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("module has no trainable parameters")
        dtypes = {p.dtype for p in params}
        devices = {p.device for p in params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"all parameters must share one dtype and device, got {dtypes} on {devices}")
        self.names = [name for name, p in module.named_parameters() if p.requires_grad]
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        total = sum(self.numels)
        self.data = torch.empty(total, dtype=params[0].dtype, device=params[0].device, pin_memory=pin_memory)
        self.grad = torch.zeros_like(self.data)
        offset = 0
        for p, n in zip(params, self.numels):
            self.data[offset : offset + n].copy_(p.data.reshape(-1))
            p.data = self.data[offset : offset + n].view_as(p)
            # A preset .grad makes autograd accumulate in place, i.e. into self.grad.
            p.grad = self.grad[offset : offset + n].view_as(p)
            offset += n
        self.params = params
        # each parameter's view in its own shape, without requires_grad (what an in-place rule may write)
        self.views = [v.view(shape) for v, shape in zip(self.layer_views(self.data), self.shapes)]
        self.flat_grad = True

    @property
    def numel(self) -> int:
        return self.data.numel()

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def layer_views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Split any tensor laid out like `data` into one view per parameter (per-layer messages)."""
        return list(torch.split(flat, self.numels))

    def release_grads(self) -> None:
        """From now on each .grad is the tensor backward makes (no preset buffer to zero and add into)."""
        self.flat_grad = False
        for p in self.params:
            p.grad = None

    def zero_grad(self) -> None:
        if self.flat_grad:
            self.grad.zero_()
        else:
            for p in self.params:
                p.grad = None

    def pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(weights, gradient) for an elementwise rule: the two flat tensors, or after `release_grads` each
        parameter's view with autograd's gradient (the same arithmetic element by element)."""
        if self.flat_grad:
            return [(self.data, self.grad)]
        return [(w, p.grad) for w, p in zip(self.views, self.params)]

    def is_intact(self) -> bool:
        """True while every parameter (and, unless released, every gradient) still aliases the flat buffers."""
        flat_data, flat_grad = self.data.data_ptr(), self.grad.data_ptr()
        size = self.data.element_size()
        offset = 0
        for p, n in zip(self.params, self.numels):
            if p.data_ptr() != flat_data + offset * size or (
                self.flat_grad and (p.grad is None or p.grad.data_ptr() != flat_grad + offset * size)
            ):
                return False
            offset += n
        return True
