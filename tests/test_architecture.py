"""The apps point one way (issue 17): config > agents > review > memory, and no module of them is
part of an import cycle. The contract lives in .importlinter; `make lint` runs it too."""

from __future__ import annotations

from pathlib import Path

import grimp
from importlinter import configuration
from importlinter.application.use_cases import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("config", "agents", "review", "memory")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One import path around the cycle, with the lines that import, for the failure message."""
    members = set(component)
    lines = []
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            details = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(f"l.{d['line_number']}" for d in details)
            lines.append(f"  {importer} -> {imported} ({where})")
    return "\n".join(lines)


def test_layers_contract_is_kept():
    configuration.configure()
    kept = lint_imports(config_filename=str(ROOT / ".importlinter"), cache_dir=None, no_logo=True)
    assert kept, "An import breaks .importlinter (see the report above): the apps must point one way."


def test_no_import_cycle_between_modules():
    # Imports under `if TYPE_CHECKING:` never run; function-level imports do, so they count.
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    cycles = import_cycles(graph)
    report = "\n\n".join(f"cycle of {len(c)} modules:\n{describe(graph, c)}" for c in cycles)
    assert not cycles, f"Import cycles between modules:\n\n{report}"


def test_cycle_finder_reports_a_cycle_and_ignores_a_chain():
    graph = grimp.ImportGraph()
    for importer, imported in [("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")]:
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    assert import_cycles(graph) == [["a.x", "a.y", "a.z"]]
