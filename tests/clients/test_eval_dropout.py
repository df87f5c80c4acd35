"""``eval-dropout`` (every method): evaluation with dropout active when set, inactive
otherwise, reproducible, and training unchanged either way."""

import pytest
from methods_data import NEEDS, for_method
from run_records import rounds

from fgl_flower.inprocess import run_inprocess
from fgl_flower.methods import METHODS


def run_rounds(flat, out, **changes) -> list[dict]:
    run_inprocess({**flat, **changes, "out-dir": str(out)})
    return rounds(out)


@pytest.mark.parametrize("method", list(METHODS))
def test_eval_dropout_changes_the_evaluation_and_nothing_else(flat, method, tmp_path, request):
    flat = for_method(flat, method, request)
    flat.update(
        {
            "num-rounds": 2 if METHODS.get(method).fixed_rounds is None else 1,
            "dropout": 0.5,
            **NEEDS.get(method, {}),
        }
    )
    clean = run_rounds(flat, tmp_path / "clean")
    noisy = run_rounds(flat, tmp_path / "noisy", **{"eval-dropout": True})
    again = run_rounds(flat, tmp_path / "again", **{"eval-dropout": True})
    no_dropout = run_rounds(flat, tmp_path / "p0", **{"eval-dropout": True, "dropout": 0.0})
    reference = run_rounds(flat, tmp_path / "p0-clean", dropout=0.0)
    for a, b in zip(clean, noisy):  # training and its uploads: the same
        assert a["train"] == b["train"] and a["bytes_up"] == b["bytes_up"]
    assert any(a["clients"] != b["clients"] for a, b in zip(clean, noisy))  # dropout is on
    assert [r["clients"] for r in noisy] == [r["clients"] for r in again]  # seeded masks
    # with no dropout to keep, train-mode evaluation is eval-mode evaluation
    assert [r["clients"] for r in no_dropout] == [r["clients"] for r in reference]
