"""The package's modules import each other without a circle: every ``import`` counts,
also inside functions (a "local import" only postpones a circle), except under
``if TYPE_CHECKING:``; importing ``a.b.c`` also runs the package ``a.b`` (an edge to it). A
module's own package ``__init__`` is not an edge (Python runs it first by design). And the
two halves of a method stay apart: a server module imports no client module, and the
specs import neither half (nor torch; a model name registry is torch-free)."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fgl_flower"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The package modules ``name`` (at ``path``) imports: each target resolved to the
    longest known module prefix (``from a.b import c`` is ``a.b.c`` if that is a module)."""
    tree = ast.parse(path.read_text())
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets.update(
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            )
    out = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        while target and target != "fgl_flower":  # the module and the packages it runs
            if target != name and not name.startswith(target + "."):
                out.add(target)
            target = target.rpartition(".")[0]
    return out


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_package_has_no_import_circle():
    known = modules()
    graph = {name: imported(path, name, known) for name, path in known.items()}
    assert "fgl_flower.methods" in graph["fgl_flower.parse"]  # the scan sees imports
    circle = find_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_scan_finds_a_circle_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_circle(graph) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, name, known) for name, path in known.items()}


def test_servers_import_no_client_module():
    """A server needs a method's record keys, not its client: those keys live in the
    torch-free spec (``methods/<m>.py``)."""
    bad = {
        name: sorted(t for t in targets if t.startswith("fgl_flower.clients"))
        for name, targets in graph().items()
        if name.startswith("fgl_flower.strategies")
    }
    assert not {k: v for k, v in bad.items() if v}


def test_the_specs_import_neither_half_nor_torch():
    g = graph()
    halves = ("fgl_flower.strategies", "fgl_flower.clients")
    bad = {
        name: sorted(t for t in targets if t.startswith(halves))
        for name, targets in g.items()
        if name.startswith("fgl_flower.methods")
    }
    assert not {k: v for k, v in bad.items() if v}
    code = "import sys, fgl_flower.methods as m; assert len(m.METHODS) > 20; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
