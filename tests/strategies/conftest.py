import pytest

from fgl_flower.app_defaults import load_app_defaults
from fgl_flower.inprocess import InProcessGrid


@pytest.fixture
def messages():
    """Messages need a task identity, which a SuperLink (or the in-process grid) sets."""
    InProcessGrid(load_app_defaults(), 1)
