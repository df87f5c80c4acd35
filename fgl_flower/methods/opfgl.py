"""O-pFGL's run options (``opfgl.*``), the pseudo-graph optimisation's hyperparameters and
their validation (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from fgl_flower.config import MethodOptions, RunConfig
from fgl_flower.errors import ConfigError
from fgl_flower.methods.spec import MethodSpec
from fgl_flower.probes import Probe

#: Record names of the two O-pFGL payloads.
STATS = "class-stats"
PSEUDO_GRAPH = "pseudo-graph"
STAT_KEYS = ("cnt", "present", "orig_cnt", "s1", "s2")
#: Key in the statistics record of HRE's two counts (nodes added, correctly labelled).
HRE = "hre"

VARIANTS = ("official", "paper")

#: The pseudo-graph each client receives and the distillation it drives, measured by each
#: client in the one round (:meth:`fgl_flower.clients.opfgl.OPFGLClient.train`).
PROBES = (
    Probe(
        "pseudo.nodes",
        "nodes of the global pseudo-graph the client received",
        dead_below=1,
        why="The pseudo-graph is empty: Stage 1's global model learns nothing global.",
    ),
    Probe(
        "pseudo.coverage",
        "share of the client's training classes present in the pseudo-graph "
        "(with rate = 0 every class has nodes: pseudo.aligned says whether they carry statistics)",
        dead_below=0.5,
        why="The pseudo-graph lacks most of this client's classes: the global model trained on it "
        "cannot predict them, and Stage 2 distils from a teacher that never saw them.",
    ),
    Probe("pseudo.edges", "directed edges per node of the pseudo-graph"),
    Probe(
        "distill.gamma",
        "mean node-adaptive distillation weight gamma_i of Stage 2",
        dead_below=1e-6,
        why="Stage 2 distils nothing from the global model (beta = 0): it is plain local fine-tuning.",
    ),
    Probe(
        "pseudo.aligned",
        "share of the pseudo-graph's nodes whose class has pooled statistics (the server's)",
        dead_below=0.5,
        why="Most pseudo nodes belong to classes no client sent statistics for: they stay the "
        "initial noise, and Stage 1 learns those classes from noise.",
    ),
    Probe(
        "hre.share",
        "nodes HRE added to the statistics per labelled node, all clients summed "
        "(the server's; idle with opfgl.topk = 0)",
        dead_below=0.01,
        why="HRE added almost no node (fewer than 1 per 100 labelled ones): the statistics are "
        "the labelled nodes' alone, as with HRE off (e.g. f_th = 1.0 with d_th = 20 on Cora "
        "Louvain+).",
    ),
    Probe(
        "pseudo.fit",
        "last over first loss of the pseudo-graph optimisation (the server's; its "
        "smoothness term keeps it above 0)",
        dead_above=0.95,
        why="The optimisation reduced the statistics-matching loss by less than 5%: the "
        "pseudo-graph does not carry the pooled class statistics.",
    ),
)


@dataclass(frozen=True)
class CondenseOptions:
    """Hyperparameters of the pseudo-graph optimisation (spec §4.2)."""

    hops: int = 1
    steps: int = 3000
    lr_feat: float = 5e-3
    lr_adj: float = 1e-3
    hidden: int = 128
    threshold: float = 0.01
    feat_alpha: float = 10.0
    smoothness_alpha: float = 0.1
    paper: bool = False  # binary adjacency, variance matching, L2 smoothness kernel


@dataclass(frozen=True)
class OPFGLOptions(MethodOptions):
    """O-pFGL hyperparameters (defaults: the official code's run scripts, spec §4.2; e.g.
    ``hops`` 1 as ``run_main.sh`` passes it, where the code's argparse default is 2)."""

    variant: str = "official"
    hops: int = CondenseOptions.hops
    nodes_per_class: int = 1
    rate: float = 0.0
    # The pseudo-graph optimisation's defaults are CondenseOptions'.
    condense_steps: int = CondenseOptions.steps
    lr_feat: float = CondenseOptions.lr_feat
    lr_adj: float = CondenseOptions.lr_adj
    pge_hidden: int = CondenseOptions.hidden
    edge_threshold: float = CondenseOptions.threshold
    feat_alpha: float = CondenseOptions.feat_alpha
    smoothness_alpha: float = CondenseOptions.smoothness_alpha
    lr_global: float = 1e-4
    lr_ft: float = 1e-4
    max_steps: int = 3000
    eval_every: int = 100
    patience: int = 5
    beta: float = 0.2
    gamma_min: float = -1.0
    gamma_max: float = -1.0
    lp_iters: int = 2
    lp_alpha: float = 0.9
    topk: int = 1  # spec recommendation 16 (K = 1 for up to 10 classes); the code's argparse: 0
    conf_threshold: float = 0.95
    degree_threshold: int = 0
    #: the statistics through SecAgg+ (fgl_flower.secagg): the server learns only their sums
    secure_aggregation: bool = False
    secagg_shares: int = (
        0  # neighbours per client, itself included (0: SecAgg+'s 2*ceil(log2 n)+1; >= n: all)
    )
    secagg_fraction_bits: int = 40  # fixed-point resolution 2^-bits of the summed statistics

    @property
    def paper(self) -> bool:
        return self.variant == "paper"

    def condense_options(self) -> CondenseOptions:
        """The server's pseudo-graph optimisation settings."""
        return CondenseOptions(
            hops=self.hops,
            steps=self.condense_steps,
            lr_feat=self.lr_feat,
            lr_adj=self.lr_adj,
            hidden=self.pge_hidden,
            threshold=self.edge_threshold,
            feat_alpha=self.feat_alpha,
            smoothness_alpha=self.smoothness_alpha,
            paper=self.paper,
        )


def check_config(cfg: RunConfig) -> None:
    """Reject settings O-pFGL cannot run before anything starts."""
    o = OPFGLOptions.from_config(cfg)
    if cfg.num_rounds != 1:
        raise ConfigError(
            f"opfgl is one-shot (one upload, one download): set num-rounds=1 (got {cfg.num_rounds})."
        )
    if cfg.fraction_train < 1.0:
        raise ConfigError(
            f"opfgl is one-shot: its pseudo-graph pools the statistics of every client, so all "
            f"clients take part; set fraction-train=1 (got {cfg.fraction_train})."
        )
    o.require_choice("opfgl", "variant", VARIANTS)
    o.require_at_least_one(
        "opfgl", "hops", "nodes_per_class", "eval_every", "patience", "pge_hidden"
    )
    if o.rate < 0 or o.topk < 0 or o.condense_steps < 0 or o.max_steps < 0:
        raise ConfigError("opfgl.rate, topk, condense-steps and max-steps must be non-negative.")
    if not 0 <= o.secagg_fraction_bits <= 56 or o.secagg_shares < 0:
        raise ConfigError(
            f"opfgl.secagg-fraction-bits must be in [0, 56] and opfgl.secagg-shares >= 0 "
            f"(got {o.secagg_fraction_bits}, {o.secagg_shares})."
        )
    if not 0 <= o.lp_alpha <= 1:
        raise ConfigError(f"opfgl.lp-alpha must be in [0, 1] (got {o.lp_alpha}).")


SPEC = MethodSpec(
    name="opfgl",
    strategy="fgl_flower.strategies.opfgl:OPFGLStrategy",
    client="fgl_flower.clients.opfgl:OPFGLClient",
    space={
        "beta": "0.05..0.5",
        "lp-alpha": "0.5..0.99",
    },
    tasks=("node",),
    summary="One-shot: class statistics up, a condensed global pseudo-graph down, then "
    "local two-stage training with node-adaptive distillation.",
    reference="Yan et al., O-pFGL (one-shot personalized FGL)",
    options=OPFGLOptions.defaults(),
    check=check_config,
    probes=PROBES,
    # the paper's backbone (spec §4.2): a GCN of width 64 without dropout; the splits and
    # the metric's weights stay the run's, so that methods run side by side share them
    defaults={"hidden": 64, "dropout": 0.0},
    fixed_rounds=1,
    query_actions=("stats",),
    config_note="one-shot; needs num-rounds = 1 (spec §4.2 defaults)",
    option_help={
        "variant": "official (released code) | paper (binary A', variance, no gamma clip)",
        "hops": "h: statistics of [X || A^X || ... || A^h X]",
        "nodes-per-class": "pseudo-graph nodes per class when rate = 0 (Cora, CiteSeer, PubMed)",
        "rate": "> 0: ceil(rate * labelled count) nodes per class",
        "condense-steps": "server iterations of the pseudo-graph optimisation",
        "lr-feat": "Adam lr of the synthetic features X'",
        "lr-adj": "Adam lr of the link predictor g_theta",
        "pge-hidden": "hidden width of g_theta",
        "edge-threshold": "delta: weights below it are dropped",
        "feat-alpha": "weight of the alignment loss",
        "smoothness-alpha": "weight of the smoothness loss",
        "lr-global": "Stage 1 (M_G on the pseudo-graph) Adam lr",
        "lr-ft": "Stage 2 (fine-tuning with distillation) Adam lr",
        "max-steps": "per stage (steps 0..max-steps)",
        "eval-every": "local val evaluation interval of both stages",
        "patience": "evaluations without improvement before stopping",
        "beta": "reg_a: gamma_i = beta * y_lp_i . w_dist",
        "gamma-min": "lower clip bound of gamma (< 0: unset)",
        "gamma-max": "upper clip bound of gamma (< 0: unset)",
        "lp-iters": "label propagation steps T",
        "lp-alpha": "label propagation alpha",
        "topk": "HRE: strongest classes expanded (0: HRE off; every released config 1 or 4)",
        "conf-threshold": "HRE: f_th on the normalised LP confidence",
        "degree-threshold": "HRE: d_th on the local degree (0: off)",
        "secure-aggregation": "the statistics through SecAgg+: the server learns only their sums",
        "secagg-shares": "SecAgg+ neighbours per client, itself included (0: 2*ceil(log2 n)+1; >= n: all, i.e. SecAgg)",
        "secagg-fraction-bits": "fixed-point resolution 2^-bits of each summed value (at 32, Cora Louvain+ moved by up to 0.6 points)",
    },
    # the no-option demo (no dataset named): 100 of the optimisations' 3000 steps each
    demo={"opfgl.condense-steps": 100, "opfgl.max-steps": 100},
)
