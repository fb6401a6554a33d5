"""Masked means and the shape checks every advantage and loss runs first.

Conventions (all of trainers/advantages.py and trainers/losses.py): B samples, T response tokens
(right-padded), V vocabulary. A mask is bool or 0/1 and marks real response tokens; padding never
contributes to any value or gradient, even when it holds inf/nan.
"""
from __future__ import annotations

import torch
from torch import Tensor


def check_shape(name: str, x: Tensor, shape: torch.Size) -> None:
    # Broadcasting would silently turn a [B] into a [B,B]; shapes are checked instead.
    if x.shape != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(shape)}")


def as_float(x: Tensor) -> Tensor:
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def masked_sample_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Token-mean within each sample (over its mask), then mean over the samples that have tokens.

    This is the paper's aggregation: every sample weighs the same whatever its length, so one long
    response cannot drown many short ones. A sample with an empty mask has no mean and is left out;
    if every sample is empty the result is a 0 that still carries a (zero) gradient, so a training
    step never has to special-case an empty batch.
    """
    check_shape("mask", mask, x.shape)
    m = mask.bool()
    x = torch.where(m, x, torch.zeros_like(x))  # where, not x*mask: padding may hold inf/nan
    n_tok = m.sum(dim=-1)
    nonempty = n_tok > 0
    if not bool(nonempty.any()):  # CPU-GPU sync; one per loss call
        return x.sum() * 0.0
    per_sample = x.sum(dim=-1) / n_tok.clamp(min=1).to(x.dtype)
    return per_sample[nonempty].mean()
