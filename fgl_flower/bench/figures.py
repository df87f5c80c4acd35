"""The results index's figure of a paper (:func:`draw`): ours against the paper's number
with 95 % intervals, levels and differences in two panels."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from fgl_flower.bench.columns import COLUMNS

if TYPE_CHECKING:
    from fgl_flower.bench.claims import Claim, Paper
    from fgl_flower.stats import Estimate


def plotted(claim: Claim) -> bool:
    """Whether :func:`draw` shows ``claim``: it has the paper's number and its metrics are in
    points (a count, e.g. a payload in KiB, is in the table only)."""
    return claim.paper is not None and all(_percent(m) for m in claim.metrics)


def draw(paper: Paper, path: Path) -> bool:
    """The paper's figure (``False``, nothing drawn, if no claim has a paper number). Top
    panel, levels: ours minus the paper's number with its 95 % interval (the paper at 0).
    Bottom panel, differences (a method minus another, paired by seed): the paper's
    difference (open diamond) and ours with its interval, 0 marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[bool, list[tuple[str, float, Estimate]]] = {False: [], True: []}
    for claim in paper.claims:
        if not plotted(claim):
            continue
        for metric, value, est in zip(claim.metrics, claim.paper, claim.ours):
            label = _short(claim.text) + (f" · {metric}" if len(claim.metrics) > 1 else "")
            panels[claim.difference].append((label, value, est))
    used = [(diff, items) for diff, items in panels.items() if items]
    if not used:
        return False
    matplotlib.rcParams["svg.hashsalt"] = "fgl-flower"  # the same SVG for the same numbers
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: small, searchable
    heights = [len(items) + 1 for _, items in used]
    fig, axes = plt.subplots(
        len(used),
        1,
        figsize=(9, 0.5 + 0.26 * sum(heights) + 0.5 * len(used)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (diff, items) in zip(axes[:, 0], used):
        ys = list(range(len(items)))[::-1]
        shift = 0.0
        for y, (_, value, est) in zip(ys, items):
            shift = 0.0 if diff else value  # levels: ours minus the paper's
            if est.low is not None:
                ax.plot([est.low - shift, est.high - shift], [y, y], color="tab:blue", lw=2)
            face = "white" if est.from_page else "tab:blue"
            ax.plot(est.mean - shift, y, "o", mec="tab:blue", mfc=face, ms=5)
            if diff:
                ax.plot(value, y, "D", mfc="none", mec="black", ms=6)
        ax.axvline(0, color="black" if not diff else "grey", lw=0.8, ls="--" if not diff else "-")
        ax.set_yticks(ys, [label for label, _, _ in items], fontsize=7)
        ax.set_ylim(-0.7, len(items) - 0.3)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel(
            "a method minus another (points): paper ◇, ours ● (paired by seed; ○ unpaired, †)"
            if diff
            else "ours minus the paper's number (points; the paper at the dashed line; ○ †)",
            fontsize=8,
        )
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp")
    kind = path.suffix.lstrip(".")  # svg (the index's), png to look at
    fig.savefig(tmp, format=kind, metadata={"Date": None} if kind == "svg" else None, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return True


def _percent(metric: str) -> bool:
    """Whether a claim's metric is in points (a column in percent, or a script's value)."""
    return COLUMNS[metric].percent if metric in COLUMNS else True


def _short(text: str, width: int = 60) -> str:
    text = re.sub(r"\s*\((?:Tables?|Fig\.|Figure|§)[^)]*\)$", "", text)  # stays in the table
    return text if len(text) <= width else text[: width - 1] + "…"
