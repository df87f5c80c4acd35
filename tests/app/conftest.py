import pytest

from fgl_flower.config import load_app_defaults


@pytest.fixture
def flat(tmp_path):
    """App defaults (synthetic data), small and fast, writing into a tmp folder."""
    cfg = load_app_defaults()
    cfg.update({"out-dir": str(tmp_path / "run"), "num-rounds": 2, "num-clients": 3,
                "progress": False, "data.synthetic.num-nodes": 300})
    return cfg
