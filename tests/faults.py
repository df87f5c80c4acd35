"""Fault injection for the tests: a Flower client mod, never a product flag."""

from __future__ import annotations

from flwr.app import Context, Message


def fail_partition(partition: int, rounds: set[int], message_type: str = "train"):
    """A ClientApp mod that raises in ``partition``'s ``message_type`` messages of
    ``rounds`` before the handler runs (so the client's state stays as it was)."""

    def mod(msg: Message, context: Context, call_next) -> Message:
        config = msg.content.get("config")
        rnd = int(config["server-round"]) if config is not None and "server-round" in config else 0
        if (
            int(context.node_config["partition-id"]) == partition
            and rnd in rounds
            and msg.metadata.message_type == message_type
        ):
            raise RuntimeError(f"injected fault (partition {partition}, round {rnd})")
        return call_next(msg, context)

    return mod


def interrupted(flat: dict, fail_round: int, partition: int = 1) -> None:
    """Run ``flat`` in-process until ``partition`` fails in ``fail_round`` (the run stops
    there, its checkpoints written up to then)."""
    import pytest

    from fgl_flower.client_app import make_app
    from fgl_flower.inprocess import InProcessGrid
    from fgl_flower.parse import parse_run_config
    from fgl_flower.server_app import run
    from fgl_flower.strategies.grid import ClientFailure

    cfg = parse_run_config(flat)
    grid = InProcessGrid(
        flat, cfg.num_clients, client_app=make_app([fail_partition(partition, {fail_round})])
    )
    with pytest.raises(ClientFailure):
        run(grid, cfg)
