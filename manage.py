#!/usr/bin/env python
"""Django's command-line utility for RelayOps. A command that cannot start (settings refused, database
missing or unreachable) ends with one line saying how to fix it (relayops.startup); ``--traceback``
shows the traceback instead."""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayops.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        from relayops.startup import hint

        message = None if "--traceback" in sys.argv else hint(exc)
        if message is None:
            raise
        sys.stderr.write(message + "\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
