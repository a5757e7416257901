"""The apps point one way (issue 17): config > agents > review > memory, and no module of them is
part of an import cycle. The contract lives in .importlinter; `make lint` runs it too.

And one rule decides people's rights (issue 32): `is_superuser`, `is_staff` and
`WorkspaceMembership.is_admin` are read in memory/access.py only (see ALLOWED for the exceptions)."""

from __future__ import annotations

import ast
import re
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


# --- The identity rule (issue 32): who holds which rights is read in memory/access.py only ------
RIGHTS_NAMES = frozenset({"is_superuser", "is_staff", "is_admin"})
# Admin options name model fields for columns, filters and forms: the settings of the admin site,
# which decide nothing (memory.access still decides who sees the rows and who changes them).
ADMIN_OPTIONS = frozenset(
    {"list_display", "list_filter", "fields", "readonly_fields", "fieldsets", "search_fields", "ordering", "exclude"}
)
# Where reading or writing those fields outside memory/access.py is allowed, and why. Migrations,
# tests and bench are not scanned (they create and inspect people as fixtures).
ALLOWED: dict[str, str] = {
    "memory/access.py": "the rule itself",
    "memory/models.py:WorkspaceMembership": "declares `is_admin` and names it in its own __str__",
    "agents/management/commands/engram_up.py": "creates the demo superuser and makes it admin of the demo workspace",
    "agents/management/commands/seed_demo.py": "makes the superusers admins of the demo workspace it creates",
}


def rights_reads(source: str, path: str = "<memory>") -> list[str]:
    """Where `source` reads or writes is_superuser / is_staff / is_admin: an attribute
    (`user.is_staff`, except the functions of memory.access: `access.is_staff(user)`), a keyword
    (`filter(is_admin=True)`, `defaults=...` keys are strings) or a string naming one as a field or
    lookup (`getattr(user, "is_superuser")`, `"memberships__is_admin"`, `{"is_admin": True}`),
    outside the ALLOWED places and the admin options. Each as `path:line: what`."""
    tree = ast.parse(source)
    allowed_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and f"{path}:{node.name}" in ALLOWED:
            allowed_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets = statement.targets if isinstance(statement, ast.Assign) else []
                if any(isinstance(t, ast.Name) and t.id in ADMIN_OPTIONS for t in targets):
                    allowed_lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Attribute) and node.attr in RIGHTS_NAMES:
            if not (isinstance(node.value, ast.Name) and node.value.id == "access"):
                what = f".{node.attr}"
        elif isinstance(node, ast.keyword) and node.arg and RIGHTS_NAMES & set(node.arg.split("__")):
            what = f"{node.arg}="
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and RIGHTS_NAMES & set(node.value.split("__"))
        ):
            what = repr(node.value)
        if what is not None and node.lineno not in allowed_lines:
            found.append((node.lineno, f"{path}:{node.lineno}: {what}"))
    return [line for _, line in sorted(found)]


TEMPLATE_READ = re.compile(r"\.(is_superuser|is_staff|is_admin)\b")


def test_rights_are_read_only_in_memory_access():
    found: list[str] = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            if "/migrations/" in path or path in ALLOWED:
                continue
            found += rights_reads(file.read_text(encoding="utf-8"), path)
    for file in sorted(ROOT.glob("templates/**/*.html")) + sorted(ROOT.glob("*/templates/**/*.html")):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if TEMPLATE_READ.search(line):
                found.append(f"{file.relative_to(ROOT).as_posix()}:{number}: {line.strip()}")
    listing = "\n".join(f"  {line}" for line in found)
    assert not found, (
        "Rights (is_superuser, is_staff, is_admin) are read outside memory/access.py: ask memory.access "
        f"(is_superuser, is_staff, workspaces(user, 'administer'), …) instead, or add to ALLOWED with why:\n{listing}"
    )


def test_rights_finder_flags_reads_and_spares_the_rule_and_admin_options():
    source = """
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "is_admin")

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser or access.is_superuser(request.user)


def admins(ws):
    return Membership.objects.filter(workspace=ws, is_admin=True) | Membership.objects.filter(
        **{"user__is_staff": True}
    )


def label(user):
    return getattr(user, "is_staff", False)
"""
    assert rights_reads(source) == [
        "<memory>:6: .is_superuser",
        "<memory>:10: is_admin=",
        "<memory>:11: 'user__is_staff'",
        "<memory>:16: 'is_staff'",
    ]


def test_for_user_is_gone():
    """Workspaces and runs a person sees are access.workspaces() / access.restrict() (issue 32): the
    querysets' own `for_user` (which skipped the is_active check) must not come back."""
    calls = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Attribute, ast.FunctionDef)) and "for_user" in (
                    node.attr if isinstance(node, ast.Attribute) else node.name,
                ):
                    calls.append(f"{file.relative_to(ROOT).as_posix()}:{node.lineno}")
    assert not calls, f"for_user is back: {calls}"
