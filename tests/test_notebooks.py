"""The notebooks in notebooks/: each runs top to bottom (a failing cell fails the suite),
the committed copies hold the outputs of such a run, and every paper method has one.

The committed outputs come from a run with the notebooks' own ``parameters`` cell
(``scripts/run_notebooks.py``); here they run with :data:`QUICK`'s fewer rounds, which
exercises every cell at a fraction of the cost."""

import importlib.util
import json
from pathlib import Path

import pytest
from methods_data import NEEDS

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
PAPER_METHODS = ("fedspray", "opfgl", "s2fgl", "feddense", "fedhero")
#: Overrides of each notebook's ``parameters`` cell for the test run (every notebook has one).
QUICK = {
    "01_quickstart.ipynb": {"rounds": 3},
    "02_fedspray.ipynb": {"rounds": 3},
    "03_opfgl.ipynb": {
        "fedavg_rounds": 3,
        "opfgl_options": {  # the tests' short O-pFGL optimisations
            k.removeprefix("opfgl."): v for k, v in NEEDS["opfgl"].items() if k.startswith("opfgl.")
        },
    },
    "04_s2fgl.ipynb": {"rounds": 3},
    "05_feddense.ipynb": {"rounds": 1},
    "06_fedhero.ipynb": {"rounds": 3},
    "07_deployment.ipynb": {"rounds": 1},
    "08_your_own_method.ipynb": {"rounds": 3},
    "09_your_own_graph.ipynb": {"rounds": 3},
    "10_tuning.ipynb": {"rounds": 3, "trials": 2, "trial_rounds": 2, "seeds": (0, 1)},
}


def _runner():
    spec = importlib.util.spec_from_file_location(
        "run_notebooks", REPO / "scripts" / "run_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path, data_root, monkeypatch):
    monkeypatch.setenv("FGL_DATA_ROOT", str(data_root))
    book = _runner().execute(
        path, timeout=600, parameters=QUICK[path.name]
    )  # raises at the first failing cell
    assert all(c.get("execution_count") for c in book.cells if c.cell_type == "code")
    injected = [c for c in book.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1


def test_quick_parameters_are_those_the_notebooks_declare():
    import nbformat

    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        _runner().inject(book, QUICK[path.name])  # raises for a name the parameters cell lacks
    with pytest.raises(ValueError, match="not assigned"):
        _runner().inject(nbformat.read(NOTEBOOKS[0], as_version=4), {"round": 3})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_holds_the_outputs_of_one_full_run(path):
    cells = code_cells(path)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1)), (
        f"{path.name}: execute it with python scripts/run_notebooks.py {path.relative_to(REPO)}"
    )
    assert not [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]
    assert sum(1 for c in cells for o in c["outputs"] if "image/png" in o.get("data", {})) >= 1


def test_every_paper_method_has_a_notebook_and_there_is_a_quickstart():
    sources = {p.name: "".join("".join(c["source"]) for c in code_cells(p)) for p in NOTEBOOKS}
    for method in PAPER_METHODS:  # a notebook that runs it
        assert any("fgl.run(" in src and f'"{method}"' in src for src in sources.values()), method
    names = " ".join(p.name for p in NOTEBOOKS)
    for topic in ("quickstart", "deployment", "your_own_method"):
        assert topic in names
