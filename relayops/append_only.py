"""A table whose rows, once written, the database itself refuses to change: for migrations.

``refuse_changes(table, function, row_trigger, adjective)`` is a migration operation that makes UPDATE,
DELETE (and, on PostgreSQL, TRUNCATE) of ``table`` raise, naming the table and the refused operation.
The names it creates are the arguments, so an existing migration keeps its triggers' names.

SQLite drops a table's triggers when Django remakes the table (most field changes do): a migration
that alters such a table on SQLite ends with ``refuse_changes(..., sqlite_only=True)`` to put them back.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def refuse_changes(
    table: str, function: str, row_trigger: str, adjective: str, *, sqlite_only: bool = False
) -> migrations.RunPython:
    postgres = f"""
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{table} is {adjective}: %% refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$ LANGUAGE plpgsql;
CREATE TRIGGER {row_trigger} BEFORE UPDATE OR DELETE ON {table}
FOR EACH ROW EXECUTE FUNCTION {function}();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
FOR EACH STATEMENT EXECUTE FUNCTION {function}();
"""
    postgres_drop = f"""
DROP TRIGGER IF EXISTS {row_trigger} ON {table};
DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};
DROP FUNCTION IF EXISTS {function}();
"""
    sqlite = [
        f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is {adjective}: {op} refused'); END;"
        for op in ("UPDATE", "DELETE")
    ]
    sqlite_drop = [f"DROP TRIGGER IF EXISTS {table}_no_{op};" for op in ("update", "delete")]

    def forwards(apps: Any, schema_editor: Any) -> None:
        postgresql = schema_editor.connection.vendor == "postgresql"
        for statement in ([] if sqlite_only else [postgres]) if postgresql else sqlite:
            schema_editor.execute(statement)

    def backwards(apps: Any, schema_editor: Any) -> None:
        postgresql = schema_editor.connection.vendor == "postgresql"
        for statement in ([] if sqlite_only else [postgres_drop]) if postgresql else sqlite_drop:
            schema_editor.execute(statement)

    return migrations.RunPython(forwards, backwards)
