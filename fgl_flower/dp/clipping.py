r"""The client's clipped upload (client-side fixed clipping).

With :math:`w_0` the shared parameters a client started its round from and :math:`w` those
after local training, the upload is

.. math::
    w_0 + \Delta \min\!\Bigl(1, \frac{C}{\lVert\Delta\rVert_2}\Bigr), \qquad \Delta = w - w_0,

the norm taken over all floating-point tensors together (float64; the cast back to float32
can add about one ulp). Integer tensors (counters such as BatchNorm's ``num_batches_tracked``)
count examples, so they go up unchanged from :math:`w_0`. An update within the bound goes up
as it is, bit for bit; a non-finite one goes up as no update (its norm, reported, makes the
server treat the client as diverged: ``on-nonfinite``).
"""

from __future__ import annotations

import math

import torch


def update_norm(upload: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    """:math:`\\lVert w - w_0\\rVert_2` over the floating-point tensors (float64)."""
    missing = sorted(set(upload) ^ set(reference))
    if missing:
        raise KeyError(f"DP clipping: the update and its reference differ in keys {missing[:5]}.")
    total = torch.zeros((), dtype=torch.float64)
    for k, w in upload.items():
        if w.is_floating_point():
            total += (w.detach().double() - reference[k].detach().double()).pow(2).sum()
    return float(total.sqrt())


def clip_update(
    upload: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], clip: float
) -> tuple[dict[str, torch.Tensor], float]:
    """``(the clipped upload, the update's norm before clipping)``; see the module doc."""
    norm = update_norm(upload, reference)
    floats = {k: w for k, w in upload.items() if w.is_floating_point()}
    out = {k: (w if k in floats else reference[k].clone()) for k, w in upload.items()}
    if not math.isfinite(norm):
        return {k: reference[k].clone() for k in upload}, norm
    if norm > clip:
        scale = clip / norm
        for k, w in floats.items():
            ref = reference[k].detach().double()
            out[k] = (ref + (w.detach().double() - ref) * scale).to(w.dtype)
    return out, norm


def clipped_upload(
    upload: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], clip: float
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """:func:`clip_update`, with the reply metrics it adds: ``dp.update-norm`` (before
    clipping) and ``dp.clipped`` (1 when the bound cut it)."""
    out, norm = clip_update(upload, reference, clip)
    return out, {"dp.update-norm": norm, "dp.clipped": float(norm > clip)}
