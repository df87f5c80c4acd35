"""Tables the docs show, made from the registries (so that a new method needs no hand edit).

A generated table sits between ``<!-- NAME -->`` and ``<!-- /NAME -->`` in a Markdown file;
``python -m fgl_flower.tables --write README.md docs/methods/index.md`` rewrites them, and a
contract test checks that they are current.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

#: Where the method pages are, relative to the repository (a link is made when one exists).
METHOD_PAGES = Path(__file__).resolve().parents[1] / "docs" / "methods"


def methods_markdown(link_prefix: str = "docs/methods/") -> str:
    """One row per registered method: name, tasks, paper, what it does (its spec's
    summary) and a link to its page where it has one."""
    from fgl_flower.methods import METHODS

    rows = ["| method | tasks | paper | what it does |", "|---|---|---|---|"]
    for name, spec in METHODS.items():
        page = (
            f" ([page]({link_prefix}{name}.md))" if (METHOD_PAGES / f"{name}.md").is_file() else ""
        )
        rows.append(
            f"| `{name}` | {', '.join(spec.tasks)} | {spec.reference or '-'} | "
            f"{spec.summary}{page} |"
        )
    return "\n".join(rows)


#: Generated blocks by name, and how each file links to the method pages.
BLOCKS: dict[str, Callable[[str], str]] = {"methods": methods_markdown}


def _prefix(path: Path) -> str:
    return (
        ""
        if path.parent.name == "methods"
        else "methods/"
        if path.parent.name == "docs"
        else "docs/methods/"
    )


def sync_blocks(text: str, path: Path) -> str:
    """``text`` (the file at ``path``) with each generated block rewritten."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name} -->\n)(?:.*?\n)?(<!-- /{name} -->)", re.S)
        text = pattern.sub(lambda m: m.group(1) + make(_prefix(path)) + "\n" + m.group(2), text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fgl_flower.tables [--write] FILE...``: rewrite (or with no ``--write``,
    list the files whose) generated tables (that are out of date)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m fgl_flower.tables", description=main.__doc__)
    p.add_argument("--write", action="store_true")
    p.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    stale = []
    for path in args.files:
        text = path.read_text()
        new = sync_blocks(text, path)
        if new != text:
            stale.append(path)
            if args.write:
                path.write_text(new)
    for path in stale:
        print(f"{'rewrote' if args.write else 'out of date:'} {path}")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    raise SystemExit(main())
