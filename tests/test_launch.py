"""The launcher's checks before a run (``fgl_flower.launch``)."""

import json
import os
import subprocess
import sys

from fgl_flower.launch import prepare


def test_a_simulation_on_a_cached_partition_is_prepared_without_torch(flat):
    """The launcher of a Ray simulation trains nothing itself: with the partition and its class
    check cached, it validates the run without importing torch (seconds of a short run)."""
    prepare(flat, "simulation")  # builds the partition and remembers the class check
    code = f"""
import json, sys
from fgl_flower.launch import prepare
prepare(json.loads({json.dumps(json.dumps(flat))}), "simulation")
print("torch imported:", "torch" in sys.modules)
"""
    res = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "torch imported: False" in res.stdout
