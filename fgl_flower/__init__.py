"""fgl-flower: federated graph learning methods on Flower's Message API.

The Python API (imported on first use, so ``import fgl_flower`` stays light):
:func:`run`, :func:`tune`, :func:`load_result`, :func:`partition`, :func:`run_config`,
:func:`register_method` and the plots :func:`plot_curves`, :func:`plot_clients`,
:func:`plot_label_mix`, :func:`plot_partition`. See :mod:`fgl_flower.api`.
"""

__version__ = "0.1.0"

_API = {
    "run": "fgl_flower.api",
    "run_config": "fgl_flower.api",
    "load_result": "fgl_flower.api",
    "partition": "fgl_flower.api",
    "tune": "fgl_flower.api",
    "RunResult": "fgl_flower.api",
    "Partition": "fgl_flower.api",
    "register_method": "fgl_flower.methods",
    "MethodSpec": "fgl_flower.methods",
    "plot_curves": "fgl_flower.plots",
    "plot_clients": "fgl_flower.plots",
    "plot_label_mix": "fgl_flower.plots",
    "plot_partition": "fgl_flower.plots",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'fgl_flower' has no attribute {name!r}")
