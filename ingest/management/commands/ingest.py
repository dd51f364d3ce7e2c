"""``ingest --tenant T PATH...``: ingest text files (or every file in folders) as documents, with a
progress bar; prints how many were created, already present, conflicting and invalid, and exits
non-zero when any conflicted or was invalid. A re-run of the same files creates nothing.

The document id is the file name without its extension (``--id-prefix`` is put before it), at
``--version`` (default 1). Each goes through the same checks and ``queue.enqueue`` as the API.
"""

from __future__ import annotations

import enum
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from ingest.documents import submit
from pipeline.errors import IdempotencyConflictError
from relayops.errors import InvalidInputError
from tenancy.names import validate_tenant


class Outcome(enum.StrEnum):
    CREATED = "created"
    PRESENT = "already present"
    CONFLICT = "conflicting"
    INVALID = "invalid"


def files_in(paths: list[str]) -> list[Path]:
    """The files named, and the files inside the folders named (recursively, hidden ones skipped), sorted."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file()
                            and not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif path.is_file():
            found.append(path)
        else:
            raise CommandError(f"{name}: no such file or folder")
    return found


class Command(BaseCommand):
    help = "Ingest text files (or folders of them) as documents of a tenant."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # --version is the documents' operation version here, not Django's version
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files, or folders of files")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--id-prefix", default="", help="put before each file's name to make its document id")
        parser.add_argument("--version", type=int, default=1, help="the operation version (default 1)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant = validate_tenant(options["tenant"])
        except InvalidInputError as exc:
            raise CommandError(str(exc)) from None
        files = files_in(options["paths"])
        counts: Counter[Outcome] = Counter()
        for path in tqdm(files, desc="ingesting", unit="file", file=self.stderr, disable=None):
            outcome, problem = self._one(tenant, path, options["id_prefix"], options["version"])
            counts[outcome] += 1
            if problem:
                tqdm.write(f"{path}: {outcome.value}: {problem}", file=self.stderr)
        self.stdout.write(", ".join(f"{outcome.value}: {counts[outcome]}" for outcome in Outcome))
        if counts[Outcome.CONFLICT] or counts[Outcome.INVALID]:
            raise CommandError(f"{counts[Outcome.CONFLICT]} conflicting and {counts[Outcome.INVALID]} invalid file(s)")

    def _one(self, tenant: str, path: Path, prefix: str, version: int) -> tuple[Outcome, str]:
        try:
            content = path.read_bytes().decode("utf-8")
            submitted = submit(tenant, prefix + path.stem, version, content)
        except UnicodeDecodeError:
            return Outcome.INVALID, "not UTF-8 text"
        except InvalidInputError as exc:
            return Outcome.INVALID, str(exc)
        except IdempotencyConflictError as exc:
            return Outcome.CONFLICT, f"{exc.key} exists with other content"
        return (Outcome.CREATED if submitted.created else Outcome.PRESENT), ""
