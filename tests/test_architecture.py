"""The apps point one way (issue 17): config > agents > review > memory, and no module of them is
part of an import cycle. The contract lives in .importlinter; `make lint` runs it too. So do the
classifier's (issue 36): memory.classifier imports no Django, and only the package itself imports
its modules.

No module is over 800 lines outside migrations and no function over 150 (issue 36).

And one rule decides people's rights (issue 32): `is_superuser`, `is_staff` and
`WorkspaceMembership.is_admin` are read in memory/access.py only (see ALLOWED for the exceptions)."""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

import grimp
import pytest
from importlinter import configuration
from importlinter.application.use_cases import lint_imports
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.protected import ProtectedContract

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
    """Every contract of .importlinter: the layers and the two of memory.classifier."""
    configuration.configure()
    kept = lint_imports(config_filename=str(ROOT / ".importlinter"), cache_dir=None, no_logo=True)
    assert kept, "An import breaks .importlinter (see the report above): the apps must point one way."


def classifier_contract(key: str) -> ForbiddenContract | ProtectedContract:
    """The contract `key` of .importlinter, as lint-imports builds it."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    section = config[f"importlinter:contract:{key}"]
    kinds = {"forbidden": ForbiddenContract, "protected": ProtectedContract}
    # Every option of these two contracts is a list of modules, one a line.
    options = {option: value.split() for option, value in section.items() if option not in ("name", "type")}
    top = config["importlinter"]
    session = {
        "root_packages": top["root_packages"].split(),
        "include_external_packages": top["include_external_packages"],
    }
    return kinds[section["type"]](name=section["name"], session_options=session, contract_options=options)


def classifier_graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    """The classifier package and its callers, with `imports` on top of the allowed ones."""
    graph = grimp.ImportGraph()
    graph.add_module("django", is_squashed=True)
    own = [
        ("memory.classifier", "memory.classifier.reading"),
        ("memory.classifier.verdict", "memory.classifier.reading"),
        ("tests.memory.test_classifier_hostile", "memory.classifier.reading"),  # the one exception
    ]
    for importer, imported in own + list(imports):
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import")
    return graph


def test_the_classifier_contracts_keep_the_package_and_refuse_django_and_its_modules():
    no_django, internals = classifier_contract("classifier-no-django"), classifier_contract("classifier-internals")
    calls_the_package = classifier_graph(("memory.services.conflicts", "memory.classifier"))
    assert no_django.check(calls_the_package, verbose=False).kept
    assert internals.check(calls_the_package, verbose=False).kept
    uses_django = classifier_graph(("memory.classifier.reading", "django"))
    assert not no_django.check(uses_django, verbose=False).kept
    for importer in ("memory.services.conflicts", "bench.eval_streams", "tests.memory.test_pair_model"):
        reaches_in = classifier_graph((importer, "memory.classifier.reading"))
        assert not internals.check(reaches_in, verbose=False).kept, importer


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
    "memory/models/tenancy.py:WorkspaceMembership": "declares `is_admin` and names it in its own __str__",
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


# --- Sizes (issue 36): a module a reader can hold, a function a reader can follow ---------------------
MODULE_MAX_LINES = 800
FUNCTION_MAX_LINES = 150


def project_modules() -> list[Path]:
    """Every .py file of the project but its migrations (hidden directories: .venv, caches)."""
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not any(part.startswith(".") or part == "migrations" for part in path.relative_to(ROOT).parts)
    ]


def oversized(source: str, path: str = "<memory>") -> list[str]:
    """The module itself if it has more than MODULE_MAX_LINES lines, and each function (or method)
    of more than FUNCTION_MAX_LINES, from its `def` line to its last."""
    found = []
    lines = len(source.splitlines())
    if lines > MODULE_MAX_LINES:
        found.append(f"{path}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_MAX_LINES:
                found.append(f"{path}:{node.lineno}: {node.name}() {length} lines")
    return found


def test_no_module_over_800_lines_and_no_function_over_150():
    modules = project_modules()
    assert {"memory/models/__init__.py", "bench/attacks.py", "clients/python/engram_client/memory_agent.py"} <= {
        path.relative_to(ROOT).as_posix() for path in modules
    }
    assert not any("/migrations/" in path.as_posix() or "/.venv/" in path.as_posix() for path in modules)
    found = [
        line
        for path in modules
        for line in oversized(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    listing = "\n".join(f"  {line}" for line in found)
    assert not found, f"Split these (modules by responsibility, functions into named steps):\n{listing}"


@pytest.mark.parametrize(
    ("module_lines", "function_lines", "expected"),
    [
        (800, 150, []),
        (801, 150, ["<memory>: 801 lines"]),
        (800, 151, ["<memory>:2: step() 151 lines"]),
    ],
)
def test_size_finder_counts_module_and_function_lines(module_lines, function_lines, expected):
    body = ["    x = 1"] * (function_lines - 1)
    source = ["import os", "def step():", *body]
    source += ["y = 2"] * (module_lines - len(source))
    assert oversized("\n".join(source)) == expected
