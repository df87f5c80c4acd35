#!/usr/bin/env python
"""Execute the notebooks top to bottom and save them with their outputs.

    python scripts/run_notebooks.py                 # every notebooks/*.ipynb, in place
    python scripts/run_notebooks.py notebooks/01_quickstart.ipynb

Each runs in a fresh kernel whose working directory is a temporary folder (its runs/ go
there), reading the datasets from $FGL_DATA_ROOT. The committed notebooks are written by
this script, so their outputs come from an execution of the committed code; the tests
(tests/test_notebooks.py) execute them again.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int = 900):
    """``path`` executed in a fresh kernel (cwd: a temporary folder); returns the notebook.
    Raises ``nbclient.exceptions.CellExecutionError`` at the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="fgl-notebook-") as cwd:
        NotebookClient(book, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": cwd}}).execute()
    return book


def settle(book) -> None:
    """Stream outputs as a terminal leaves them: consecutive chunks of one stream joined,
    and text overwritten after a carriage return (progress bars) dropped, so the saved
    notebook shows each bar's final state."""
    for cell in book.cells:
        merged: list = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (out.get("output_type") == "stream" and last is not None
                    and last.get("output_type") == "stream" and last["name"] == out["name"]):
                last["text"] += out["text"]
            else:
                merged.append(out)
        for out in merged:
            if out.get("output_type") == "stream":
                out["text"] = "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1]
                                        for line in out["text"].split("\n"))
        if "outputs" in cell:
            cell["outputs"] = merged


def main(paths: list[str]) -> int:
    import nbformat

    targets = [Path(p) for p in paths] or sorted((REPO / "notebooks").glob("*.ipynb"))
    for path in targets:
        t0 = time.perf_counter()
        book = execute(path)
        settle(book)
        nbformat.write(book, path)
        print(f"{path.name}: executed in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
