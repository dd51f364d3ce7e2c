"""Meta-test: nothing in RelayOps relies on database session state, which a transaction pool loses.

Behind PgBouncer in transaction mode each transaction may run on a different server connection
(docs/scaling.md, "PgBouncer"; tests/acceptance/test_pgbouncer.py runs a cluster behind one). The
drains' LISTEN is the one session RelayOps keeps, on its own connection (pipeline.runtime.wakeups).
"""

from __future__ import annotations

import ast
import re

from tests.meta.test_conventions import ROOT, _sources

LISTENER = ROOT / "pipeline" / "runtime" / "wakeups.py"

# SQL that leaves state on the session: each pattern is searched in every string literal of the code.
# Statements are matched in upper case, as RelayOps writes its SQL (prose such as "Set SECRET_KEY" is not).
SESSION_STATE = {
    "a session SET (use SET LOCAL, set_config(..., true) or SET TRANSACTION)":
        re.compile(r"^\s*SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)"),
    "a session advisory lock (use pg_advisory_xact_lock)": re.compile(r"pg_(try_)?advisory_lock", re.IGNORECASE),
    "a cursor WITH HOLD": re.compile(r"\bWITH\s+HOLD\b", re.IGNORECASE),
    "a temporary table": re.compile(r"\bTEMP(ORARY)?\s+TABLE\b", re.IGNORECASE),
    "a prepared statement": re.compile(r"^\s*PREPARE\b|server_side_binding"),
    "a LISTEN outside pipeline.runtime.wakeups": re.compile(r"^\s*LISTEN\b"),
}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal with its line, docstrings left out (they describe, they do not run)."""
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
        and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def findings(source: str, *, listener: bool = False) -> list[tuple[int, str]]:
    """(line, what) for each use of session state in ``source``; ``listener``: the module allowed to LISTEN."""
    tree = ast.parse(source)
    found = [(line, what) for line, text in _strings(tree) for what, pattern in SESSION_STATE.items()
             if pattern.search(text) and not (listener and what.startswith("a LISTEN"))]
    # QuerySet.iterator() reads through a server-side cursor, declared WITH HOLD in autocommit.
    found += [(node.lineno, ".iterator() (a server-side cursor)") for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "iterator"]
    return found


def test_no_code_keeps_session_state_a_transaction_pool_would_lose():
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in _sources()
             for line, what in findings(path.read_text(), listener=path == LISTENER)]
    assert found == []


def test_the_patterns_find_what_they_look_for():
    source = ('"""SET x = 1 in a docstring is fine."""\n'
              'cursor.execute("SET search_path TO x")\n'
              'cursor.execute("SET LOCAL work_mem = \'64MB\'")\n'
              'raise ImproperlyConfigured("Set SECRET_KEY.")\n'
              'cursor.execute("SELECT pg_advisory_lock(1), pg_advisory_xact_lock(2)")\n'
              'cursor.execute(f\'LISTEN "{channel}"\')\n'
              'for job in Job.objects.all().iterator(): pass\n')
    assert sorted(line for line, _ in findings(source)) == [2, 5, 6, 7]
    assert sorted(line for line, _ in findings(source, listener=True)) == [2, 5, 7]
