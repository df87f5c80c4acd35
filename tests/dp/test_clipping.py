"""The client's clipped update (fgl_flower.dp.clipping)."""

import pytest
import torch

from fgl_flower.dp.clipping import clip_update, clipped_upload, update_norm


def tensors(seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return {
        "w": scale * torch.randn(4, 3, generator=g),
        "b": scale * torch.randn(3, generator=g),
        "count": torch.tensor(7),
    }


def test_an_update_within_the_bound_goes_up_as_it_is():
    ref, new = tensors(0), tensors(1)
    norm = update_norm(new, ref)
    out, got = clip_update(new, ref, norm + 1e-3)
    assert got == norm
    assert out["w"] is new["w"] and out["b"] is new["b"]  # the very tensors: bit for bit


def test_a_larger_update_is_scaled_onto_the_bound_along_its_direction():
    ref, new = tensors(0), tensors(1, scale=10.0)
    out, norm = clip_update(new, ref, 0.5)
    assert norm > 0.5
    assert update_norm(out, ref) == pytest.approx(0.5, rel=1e-6)
    direction = torch.cat([(new[k] - ref[k]).flatten() for k in ("w", "b")])
    clipped = torch.cat([(out[k] - ref[k]).flatten() for k in ("w", "b")])
    assert torch.allclose(clipped, direction * 0.5 / norm, atol=1e-6)


def test_integer_tensors_count_examples_and_go_up_unchanged_from_the_reference():
    ref, new = tensors(0), tensors(1, scale=10.0)
    new["count"] = torch.tensor(12)
    for clip in (0.5, 1e9):
        out, _ = clip_update(new, ref, clip)
        assert int(out["count"]) == 7


def test_the_reply_metrics_say_whether_the_bound_cut():
    ref, new = tensors(0), tensors(1, scale=10.0)
    _, m = clipped_upload(new, ref, 0.5)
    assert m["dp.clipped"] == 1.0 and m["dp.update-norm"] > 0.5
    _, m = clipped_upload(new, ref, 1e9)
    assert m["dp.clipped"] == 0.0


def test_a_non_finite_update_goes_up_as_no_update_with_its_norm():
    ref, new = tensors(0), tensors(1)
    new["w"][0, 0] = float("nan")
    out, norm = clip_update(new, ref, 1.0)
    assert norm != norm  # NaN, reported: the server's on-nonfinite handles the client
    assert all(torch.equal(out[k], ref[k]) for k in ref)


def test_different_keys_are_refused():
    ref, new = tensors(0), tensors(1)
    del new["b"]
    with pytest.raises(KeyError, match="differ in keys"):
        update_norm(new, ref)
