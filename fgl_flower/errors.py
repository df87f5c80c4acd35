"""Exceptions raised by fgl-flower.

Every error a user can cause (bad config, unknown name, missing data) derives from
:class:`FGLError`, so entry points can print one clear message instead of a traceback.
"""


class FGLError(Exception):
    """Base class of all user-facing fgl-flower errors."""


class ConfigError(FGLError, ValueError):
    """The run configuration is malformed or inconsistent."""


class UnknownNameError(ConfigError, KeyError):
    """A method, dataset, partitioner or model name is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DataUnavailableError(FGLError, FileNotFoundError):
    """A dataset's files are missing and cannot be downloaded."""


class CorruptDataError(FGLError):
    """A dataset's files exist but cannot be read."""


class DivergedError(FGLError):
    """A client reported a NaN or infinite loss or metric: training diverged."""
