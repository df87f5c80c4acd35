"""fgl-flower: federated graph learning methods on Flower's Message API."""

__version__ = "0.1.0"
