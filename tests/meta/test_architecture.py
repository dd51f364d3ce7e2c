"""The architecture, checked: apps import in one direction only, no module imports itself back through
others, and only the queue writes a job's status, lease or fence."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each app may import the apps before it, never one after it.
LAYERS = ("relayops", "tenancy", "pipeline", "dlq", "review", "controls", "ingest", "webhooks", "console", "demo")
JOB_OWNER = {"pipeline/queue.py", "pipeline/sql.py"}
JOB_COLUMNS = {"status", "fence", "lease_until", "lease_owner", "attempt", "visible_at"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for app in LAYERS for path in sorted((ROOT / app).rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports, at any depth in the file (a function-level import counts)."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def arrows_to_the_right(graph: dict[str, set[str]]) -> list[str]:
    layer = {app: position for position, app in enumerate(LAYERS)}
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if layer[target.split(".")[0]] > layer[source.split(".")[0]]
    )


def test_the_project_imports_form_no_circle():
    assert cycles(import_graph()) == []


def test_apps_import_only_the_apps_to_their_left():
    assert arrows_to_the_right(import_graph()) == []


def test_the_checks_can_fail():
    graph = {"pipeline.a": {"pipeline.b"}, "pipeline.b": {"pipeline.a"}, "tenancy.c": {"dlq.d"}, "dlq.d": set()}
    assert cycles(graph) == [["pipeline.a", "pipeline.b"]]
    assert arrows_to_the_right(graph) == ["tenancy.c -> dlq.d"]


def job_writes(source: str) -> list[int]:
    """Lines that write a job's status, lease or fence: a ``Job`` queryset's ``update`` or ``bulk_update``
    naming one of those columns, ``save()`` on a job, or raw ``UPDATE pipeline_job`` SQL."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.search(r"\bUPDATE\s+\"?pipeline_job\"?\s", node.value, re.I):
                lines.append(node.lineno)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain = ast.unparse(node.func.value)
        on_jobs = chain.startswith("Job.") or chain.startswith("Job(") or re.search(r"\bjobs?\b", chain) is not None
        if node.func.attr in ("update", "bulk_update") and on_jobs:
            keywords = {kw.arg for kw in node.keywords}
            written = keywords | {
                elt.value for arg in node.args[1:] for elt in getattr(arg, "elts", []) if isinstance(elt, ast.Constant)
            }
            if written & JOB_COLUMNS:
                lines.append(node.lineno)
        if node.func.attr == "save" and on_jobs:
            lines.append(node.lineno)
    return lines


def test_only_the_queue_writes_a_jobs_status_lease_or_fence():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in project_modules().values()
        if str(path.relative_to(ROOT)) not in JOB_OWNER and "migrations" not in path.parts
        for line in job_writes(path.read_text())
    ]
    assert offenders == []


@pytest.mark.parametrize("source", [
    "Job.objects.filter(pk=1).update(status='queued')",
    "jobs.update(fence=F('fence') + 1)",
    "job.save()",
    "Job.objects.bulk_update(rows, ['lease_until'])",
    "cursor.execute('UPDATE pipeline_job SET status = %s')",
])
def test_the_single_writer_check_can_fail(source):
    assert job_writes(source) == [1]


def test_the_single_writer_check_leaves_other_tables_alone():
    assert job_writes("Review.objects.filter(pk=1).update(status='approved')\nreview.save()") == []
