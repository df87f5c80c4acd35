"""The differential-privacy options of a method (``<method>.dp-*``) and their checks.

Torch-free: the config layer checks a run before anything is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fgl_flower.errors import ConfigError

DP_CLIP = "dp-clip"  # C, the L2 bound of a client's update; 0 = no differential privacy
DP_NOISE = (
    "dp-noise"  # z, the noise multiplier: std of the noise on the mean is z C / (cohort size)
)
DP_EPSILON = "dp-epsilon"  # a target epsilon after the run's rounds: z calibrated to it
DP_DELTA = "dp-delta"  # the delta of the reported (epsilon, delta)
DP_SEEDED = "dp-seeded-noise"  # noise from the run seed (reruns repeat it): experiments only

#: The options (with their defaults) of a method that offers differential privacy.
DP_OPTIONS: dict[str, float | bool] = {
    DP_CLIP: 0.0,
    DP_NOISE: 0.0,
    DP_EPSILON: 0.0,
    DP_DELTA: 1e-5,
    DP_SEEDED: False,
}
#: What each of :data:`DP_OPTIONS` means (``fgl config``, the app config's comments).
DP_HELP: dict[str, str] = {
    DP_CLIP: '>0: client-level DP, each update clipped to this L2 norm (needs agg-weight = "uniform")',
    DP_NOISE: "z: Gaussian noise of std z*dp-clip/k on the mean of k clients",
    DP_EPSILON: ">0 instead of dp-noise: z calibrated to spend this epsilon over the run",
    DP_DELTA: "delta of the reported (epsilon, delta)",
    DP_SEEDED: "noise from the run seed, repeated by reruns; anyone with the seed can remove it "
    "(experiments only)",
}


@dataclass(frozen=True)
class DPSettings:
    """A run's client-level DP: clip norm ``clip``, noise multiplier ``noise`` or target
    ``epsilon`` (0: not given), ``delta``, and whether the noise is drawn from the run seed
    (``seeded``) rather than the operating system's entropy."""

    clip: float
    noise: float
    epsilon: float
    delta: float
    seeded: bool = False


def dp_settings(cfg) -> DPSettings | None:
    """The run's DP settings, ``None`` when ``<method>.dp-clip`` is 0 (or the method has no
    DP options)."""
    opts = dict(cfg.method_options)
    if float(opts.get(DP_CLIP, 0.0)) == 0.0:
        return None
    return DPSettings(
        float(opts[DP_CLIP]),
        float(opts.get(DP_NOISE, 0.0)),
        float(opts.get(DP_EPSILON, 0.0)),
        float(opts.get(DP_DELTA, DP_OPTIONS[DP_DELTA])),
        bool(opts.get(DP_SEEDED, False)),
    )


def check_dp(cfg) -> None:
    """Stop a run whose DP options cannot give what they promise, saying what to set."""
    opts = dict(cfg.method_options)
    if DP_CLIP not in opts:
        return
    m = cfg.method
    clip, noise, epsilon = (float(opts[k]) for k in (DP_CLIP, DP_NOISE, DP_EPSILON))
    delta = float(opts[DP_DELTA])
    for key, value in ((DP_CLIP, clip), (DP_NOISE, noise), (DP_EPSILON, epsilon)):
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{m}.{key} must be a finite number >= 0 (got {value:g}).")
    if clip == 0.0:
        if noise or epsilon:
            raise ConfigError(
                f"{m}.{DP_NOISE}/{DP_EPSILON} need a clipping norm: set {m}.{DP_CLIP} > 0 "
                "(the bound of each client's update that the noise is scaled to)."
            )
        return
    if noise and epsilon:
        raise ConfigError(
            f"Give either {m}.{DP_NOISE} (the noise multiplier) or {m}.{DP_EPSILON} (a target "
            "epsilon that sets it), not both."
        )
    if not 0.0 < delta < 1.0:
        raise ConfigError(
            f"{m}.{DP_DELTA} must lie strictly between 0 and 1 (got {delta:g}); "
            "1e-5 or below 1/num-clients is usual."
        )
    if cfg.checkpoint_every > 1:
        raise ConfigError(
            f"{m}.{DP_CLIP}: with checkpoint-every={cfg.checkpoint_every} a resumed run would "
            "release again, with new noise, rounds it had already released; set "
            "checkpoint-every=1 (or 0: no checkpoints)."
        )
    if cfg.agg_weight != "uniform":
        raise ConfigError(
            f"{m}.{DP_CLIP}: differentially private averaging weighs every client "
            f"equally (a size weight would reveal, and scale, one client's update); "
            f"set agg-weight=uniform (now {cfg.agg_weight!r})."
        )
