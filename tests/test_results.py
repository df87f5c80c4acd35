"""fgl_flower.results: durable appends, and the curves drawn over incomplete rounds."""

import pytest

from fgl_flower.results import append_line


def test_append_line_adds_one_line_per_call(tmp_path):
    path = tmp_path / "records.jsonl"
    append_line(path, '{"a": 1}')
    append_line(path, '{"a": 2}')
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'


@pytest.mark.curves
def test_curves_are_drawn_over_rounds_without_evaluation_or_train_loss(tmp_path):
    """A round without evaluation (FedSage+'s generator rounds, eval-every > 1) or without a
    train loss leaves a gap in its curve, not an error."""
    from fgl_flower.results import plot_curves

    records = [
        {"round": 1, "train": {"train_loss": 1.2}},
        {"round": 2, "train": {}, "eval": {"val_acc": 0.5, "test_acc": 0.4, "val_loss": 1.1}},
        {"round": 3, "train": {"train_loss": 0.9}, "eval": {"val_acc": 0.6}},
    ]
    plot_curves(records, tmp_path / "curves.png", title="gaps")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
