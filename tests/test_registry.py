import pytest

from fgl_flower.errors import UnknownNameError
from fgl_flower.registry import Registry


def test_lookup_is_case_and_dash_insensitive():
    reg = Registry("thing")
    reg.register("Louvain-Plus", 1)
    assert reg.get("louvain_plus") == 1
    assert reg.canonical("LOUVAIN-PLUS") == "Louvain-Plus"
    assert "louvain-plus" in reg and "metis" not in reg


def test_unknown_name_suggests_close_matches():
    reg = Registry("method")
    reg.register("fedavg", 1)
    reg.register("fedprox", 2)
    with pytest.raises(UnknownNameError) as e:
        reg.get("fedav")
    msg = str(e.value)
    assert "Unknown method 'fedav'" in msg and "Did you mean 'fedavg'" in msg
    assert "fedprox" in msg  # lists what is known


def test_duplicate_registration_fails():
    reg = Registry("x")
    reg.register("a", 1)
    with pytest.raises(ValueError):
        reg.register("A", 2)
