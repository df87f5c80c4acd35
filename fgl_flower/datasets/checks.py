r"""A user's graph before it is partitioned: bad data stops here with one line, and self-loops,
duplicate and one-way edges are handled as the source's options say, never silently.

A node-level graph (:func:`check_node_graph`) needs ``x`` [N, F] finite floats, ``y`` [N]
class ids (integers >= 0; ``-1`` marks an unlabelled node, which no split uses for a loss
but which is kept in the graph) and ``edge_index`` [2, E] with ids in ``[0, N)``; optional
``train_mask``/``val_mask``/``test_mask`` [N] become its ``official_split`` (0/1/2, -1
none). A graph-level set (:func:`check_graph_set`) needs at least one graph, each with
``x`` [n_i, F] (the same F), ``edge_index`` in range and a target ``y`` of one element:
an integer tensor holds classes, a float tensor a regression target (finite).

The edge options (``data.<option>`` in the run config), and what is logged:

=================  =========  ================================================================
option             default    effect
=================  =========  ================================================================
``undirected``     false      add the reverse of every edge (one-way edges are counted in the
                              log line either way)
``self-loops``     keep       ``remove`` drops edges ``(i, i)``
``duplicates``     remove     ``keep`` leaves repeated ``(u, v)`` pairs (a GCN then weighs them
                              twice)
=================  =========  ================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from logging import INFO
from typing import TYPE_CHECKING, Any

import numpy as np

from fgl_flower.datasets.options import Option
from fgl_flower.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor
    from torch_geometric.data import Data

    from fgl_flower.datasets.graphset import GraphSet

#: The edge options of every user source (files, objects).
EDGE_OPTIONS: dict[str, Option] = {
    "undirected": Option(bool, False, "add the reverse of every edge"),
    "self-loops": Option(str, "keep", "keep | remove: edges (i, i)"),
    "duplicates": Option(str, "remove", "remove | keep: repeated (u, v) pairs"),
}

_CHOICES = {"self-loops": ("keep", "remove"), "duplicates": ("remove", "keep")}

#: ``official_split`` value of a node or graph in no official split.
NO_SPLIT = -1


class DataError(ConfigError):
    """A user's graph cannot be trained on (one line: what is wrong and what to do)."""


def check_edge_options(name: str, options: Mapping[str, Any]) -> None:
    for key, allowed in _CHOICES.items():
        if str(options.get(key, allowed[0])) not in allowed:
            raise ConfigError(
                f"{name}: data.{key}={options[key]!r}; use one of {', '.join(allowed)}."
            )


def _edges(name: str, edge_index: Any, n: int, where: str = "") -> np.ndarray:
    """``edge_index`` as an int64 ``[2, E]`` array with ids in ``[0, n)``."""
    import torch

    if edge_index is None:
        return np.zeros((2, 0), dtype=np.int64)
    e = edge_index.numpy() if isinstance(edge_index, torch.Tensor) else np.asarray(edge_index)
    if e.ndim != 2 or e.shape[0] != 2:
        raise DataError(f"{name}: {where}edge_index has shape {list(e.shape)}; give [2, E].")
    if e.size and not np.issubdtype(e.dtype, np.integer):
        if not np.all(np.mod(e, 1) == 0):
            raise DataError(f"{name}: {where}edge_index holds non-integer node ids.")
    e = e.astype(np.int64)
    bad = e[(e < 0) | (e >= n)]
    if bad.size:
        raise DataError(
            f"{name}: {where}edge_index holds node ids outside [0, {n}) "
            f"(e.g. {', '.join(map(str, np.unique(bad)[:3]))}); node ids are row numbers of x."
        )
    return e


def _features(name: str, x: Any, n: int | None, where: str = "") -> Tensor:
    import torch

    if x is None:
        raise DataError(
            f"{name}: {where}no node features x; give x [N, F] (e.g. torch.ones(N, 1) for "
            "a graph without features)."
        )
    x = torch.as_tensor(x)
    if x.is_sparse:
        x = x.to_dense()
    if x.dim() == 1:
        x = x.view(-1, 1)
    if x.dim() != 2:
        raise DataError(f"{name}: {where}x has shape {list(x.shape)}; give [N, F].")
    if n is not None and x.size(0) != n:
        raise DataError(
            f"{name}: {where}x has {x.size(0)} rows but the graph has {n} nodes; one row per node."
        )
    x = x.float()
    if not bool(torch.isfinite(x).all()):
        rows = torch.nonzero(~torch.isfinite(x).all(1)).view(-1)[:3].tolist()
        raise DataError(
            f"{name}: {where}x holds NaN or infinite values (rows {rows}); impute or drop them."
        )
    return x


def _tidy(
    name: str, e: np.ndarray, n: int, options: Mapping[str, Any], log: bool
) -> tuple[np.ndarray, dict[str, int]]:
    """``e`` after the edge options, and what was found."""
    loops = e[0] == e[1]
    keys = e[0] * n + e[1]
    _, first = np.unique(keys, return_index=True)
    found = {
        "self-loops": int(loops.sum()),
        "duplicates": int(e.shape[1] - first.size),
        "one-way": int((~np.isin(e[1] * n + e[0], keys)).sum()),
    }
    if options.get("duplicates", "remove") == "remove" and found["duplicates"]:
        e = e[:, np.sort(first)]
    if options.get("self-loops", "keep") == "remove" and found["self-loops"]:
        e = e[:, e[0] != e[1]]
    if options.get("undirected") and found["one-way"]:
        both = np.concatenate([e, e[::-1]], axis=1)
        keys = both[0] * n + both[1]
        _, first = np.unique(keys, return_index=True)
        e = both[:, np.sort(first)]
    if log and any(found.values()):
        _report(name, found, options)
    return e, found


def _report(name: str, found: dict[str, int], options: Mapping[str, Any]) -> None:
    from flwr.common.logger import log

    said = []
    if found["self-loops"]:
        kept = options.get("self-loops", "keep") == "keep"
        said.append(
            f"{found['self-loops']} self-loops "
            + ("kept (data.self-loops=remove drops them)" if kept else "removed")
        )
    if found["duplicates"]:
        kept = options.get("duplicates", "remove") == "keep"
        said.append(
            f"{found['duplicates']} duplicate edges "
            + ("kept" if kept else "removed (data.duplicates=keep keeps them)")
        )
    if found["one-way"]:
        said.append(
            f"{found['one-way']} edges without their reverse "
            + ("reversed too" if options.get("undirected") else "(data.undirected=true adds it)")
        )
    log(INFO, "%s: %s", name, "; ".join(said))


def _labels(name: str, y: Any, n: int) -> Tensor:
    import torch

    if y is None:
        raise DataError(
            f"{name}: no labels y; give y [N] with a class id per node (-1: unlabelled)."
        )
    y = torch.as_tensor(y)
    if y.dim() == 2 and y.size(1) == 1:
        y = y.view(-1)
    if y.dim() != 1:
        raise DataError(
            f"{name}: y has shape {list(y.shape)}; node tasks take one class id per node "
            "([N]); multi-label targets are not supported."
        )
    if y.size(0) != n:
        raise DataError(f"{name}: y has {y.size(0)} entries but x has {n} rows; one per node.")
    if y.is_floating_point():
        if not bool(torch.isfinite(y).all()) or not bool((y == y.round()).all()):
            raise DataError(
                f"{name}: y holds non-integer values; node tasks classify (class ids 0..C-1)."
            )
    y = y.long()
    if bool((y < NO_SPLIT).any()):
        raise DataError(f"{name}: y holds negative class ids other than -1 (unlabelled).")
    if not bool((y >= 0).any()):
        raise DataError(f"{name}: no node has a label (every y is -1).")
    return y


def _official_split(name: str, data: Any, n: int) -> Tensor | None:
    """``[N]`` 0/1/2/-1 from the ``train_mask``/``val_mask``/``test_mask`` given, or ``None``."""
    import torch

    masks = [getattr(data, f"{s}_mask", None) for s in ("train", "val", "test")]
    if all(m is None for m in masks):
        return None
    split = torch.full((n,), NO_SPLIT, dtype=torch.long)
    for k, (s, m) in enumerate(zip(("train", "val", "test"), masks)):
        if m is None:
            continue
        m = torch.as_tensor(m)
        if m.dim() != 1 or m.size(0) != n or m.dtype != torch.bool:
            raise DataError(f"{name}: {s}_mask must be a bool tensor [N] ({n} nodes).")
        if bool((split[m] != NO_SPLIT).any()):
            raise DataError(
                f"{name}: a node is in {s}_mask and an earlier mask; masks are disjoint."
            )
        split[m] = k
    return split


def check_node_graph(name: str, data: Data, options: Mapping[str, Any], log: bool = True) -> Data:
    """A checked copy of ``data`` (see the module): ``x`` float32, ``y`` long [N],
    ``edge_index`` after the edge options, ``num_classes`` and, with masks,
    ``official_split``; :class:`DataError` on bad data."""
    import torch
    from torch_geometric.data import Data

    check_edge_options(name, options)
    x = _features(name, getattr(data, "x", None), None)
    n = x.size(0)
    if n == 0:
        raise DataError(f"{name}: the graph has no nodes.")
    y = _labels(name, getattr(data, "y", None), n)
    e, _ = _tidy(name, _edges(name, getattr(data, "edge_index", None), n), n, options, log)
    out = Data(x=x, edge_index=torch.from_numpy(np.ascontiguousarray(e)), y=y)
    out.num_classes = int(y.max()) + 1
    split = _official_split(name, data, n)
    if split is not None:
        out.official_split = split
    return out


def check_graph_set(name: str, graphs: GraphSet, options: Mapping[str, Any]) -> GraphSet:
    """A checked copy of ``graphs``: the same graphs with ``x`` float32, ``y`` [1] (long for
    classes, float32 for a regression target), edges after the edge options (one log line
    for the set); ``num_classes`` C for classes, 1 for regression; :class:`DataError`."""
    import torch
    from torch_geometric.data import Data

    from fgl_flower.datasets.graphset import GraphSet

    check_edge_options(name, options)
    if len(graphs) == 0:
        raise DataError(f"{name}: no graphs.")
    out, targets, dims = [], [], set()
    totals = {"self-loops": 0, "duplicates": 0, "one-way": 0}
    for i, g in enumerate(graphs.graphs):
        where = f"graph {i}: "
        x = _features(name, getattr(g, "x", None), None, where)
        if x.size(0) == 0:
            raise DataError(f"{name}: {where}has no nodes.")
        dims.add(x.size(1))
        y = getattr(g, "y", None)
        if y is None or torch.as_tensor(y).numel() != 1:
            raise DataError(
                f"{name}: {where}needs one target y (a class id or a float); "
                "multi-task targets are not supported."
            )
        t = torch.as_tensor(y).reshape(-1)[:1]
        if not bool(torch.isfinite(t.double()).all()):
            raise DataError(f"{name}: {where}target y is NaN or infinite.")
        e, found = _tidy(
            name, _edges(name, g.edge_index, x.size(0), where), x.size(0), options, False
        )
        for k in totals:
            totals[k] += found[k]
        targets.append(t.double())
        out.append(Data(x=x, edge_index=torch.from_numpy(np.ascontiguousarray(e)), y=t))
    if len(dims) > 1:
        raise DataError(f"{name}: graphs have different feature sizes {sorted(dims)}; give one F.")
    if any(totals.values()):
        _report(name, totals, options)
    t = torch.cat(targets)
    if not any(g.y.is_floating_point() for g in out):  # integer targets: classes
        if bool((t < 0).any()):
            raise DataError(f"{name}: negative class ids in y; use 0..C-1.")
        for g in out:
            g.y = g.y.long()
        num_classes = int(t.max()) + 1
    else:
        for g in out:
            g.y = g.y.float()
        num_classes = 1
    return GraphSet(out, num_classes, graphs.official_split)
