"""The import graph's size, from import-linter's own graph library (grimp).

Prints the number of soak's modules, of the imports between them (one per importing
module and imported module, as grimp counts them), and the imports that run from a
lower layer of the layers contract (pyproject.toml, [tool.importlinter]) to a higher
one: those the contract forbids (0 while `lint-imports` passes) and those between
siblings of one layer (`a : b`), which the contract allows but docs/architecture.md
names.

    .venv/bin/python bench/import_graph.py [--smoke]
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def layers() -> list[list[str]]:
    """The layers contract's layers, top first, each a list of its packages."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in cfg["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            return [
                [part.strip() for part in layer.replace("|", ":").split(":")]
                for layer in contract["layers"]
            ]
    raise SystemExit("no layers contract in pyproject.toml")


def layer_of(module: str, tops: dict[str, int]) -> tuple[int, str] | None:
    """(layer index, the package of the contract the module belongs to)."""
    for package, index in tops.items():
        if module == package or module.startswith(package + "."):
            return index, package
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="the same: the graph is built in seconds")
    ap.parse_args()
    graph = grimp.build_graph("soak")
    tops = {package: i for i, layer in enumerate(layers()) for package in layer}
    imports = upward = sideways = 0
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            imports += 1
            a, b = layer_of(importer, tops), layer_of(imported, tops)
            if a is None or b is None:
                continue
            if b[0] < a[0]:  # index 0 is the top layer
                upward += 1
            elif b[0] == a[0] and b[1] != a[1]:
                sideways += 1
    print(
        f"import graph: {len(graph.modules)} modules, {imports} imports, "
        f"{upward} from a lower layer to a higher one, "
        f"{sideways} between siblings of one layer"
    )


if __name__ == "__main__":
    main()
