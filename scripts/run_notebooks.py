#!/usr/bin/env python
"""Execute the notebooks top to bottom and save them with their outputs.

    python scripts/run_notebooks.py                 # every notebooks/*.ipynb, in place
    python scripts/run_notebooks.py notebooks/01_quickstart.ipynb

Each runs in a fresh kernel whose working directory is a temporary folder (its runs/ go
there), reading the datasets from $FGL_DATA_ROOT. The committed notebooks are written by
this script, with the values of their ``parameters`` cell, so their outputs come from an
execution of the committed code; the tests (tests/test_notebooks.py) execute them again,
with fewer rounds through :func:`execute`'s ``parameters`` (papermill's convention: a cell
tagged ``injected-parameters`` after the one tagged ``parameters``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def inject(book, parameters: Mapping[str, Any]) -> None:
    """Insert ``name = value`` lines for ``parameters`` after ``book``'s cell tagged
    ``parameters``; each name must be assigned there (a renamed parameter fails loudly)."""
    import nbformat

    cells = [i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(
            f"parameters {sorted(parameters)} need one cell tagged 'parameters', found {len(cells)}"
        )
    declared = book.cells[cells[0]].source
    lines = declared.splitlines()
    missing = [
        name for name in parameters if not any(line.startswith(f"{name} =") for line in lines)
    ]
    if missing:
        raise ValueError(f"{missing} are not assigned in the 'parameters' cell:\n{declared}")
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in parameters.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    book.cells.insert(cells[0] + 1, cell)


def execute(path: Path, timeout: int = 900, parameters: Mapping[str, Any] | None = None):
    """``path`` executed in a fresh kernel (cwd: a temporary folder); returns the notebook.
    ``parameters`` override values of its ``parameters`` cell (:func:`inject`). Raises
    ``nbclient.exceptions.CellExecutionError`` at the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    if parameters:
        inject(book, parameters)
    with tempfile.TemporaryDirectory(prefix="fgl-notebook-") as cwd:
        NotebookClient(
            book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": cwd}}
        ).execute()
    return book


def settle(book) -> None:
    """Stream outputs as a terminal leaves them: consecutive chunks of one stream joined,
    and text overwritten after a carriage return (progress bars) dropped, so the saved
    notebook shows each bar's final state."""
    for cell in book.cells:
        merged: list = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                out.get("output_type") == "stream"
                and last is not None
                and last.get("output_type") == "stream"
                and last["name"] == out["name"]
            ):
                last["text"] += out["text"]
            else:
                merged.append(out)
        for out in merged:
            if out.get("output_type") == "stream":
                out["text"] = "\n".join(
                    line.rstrip("\r").rsplit("\r", 1)[-1] for line in out["text"].split("\n")
                )
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
