"""The public name of one pipeline pass: ``from pipeline.worker import process_once``.

The pass itself lives in pipeline.processing; the worker loop that repeats it is
pipeline.runtime.drain.
"""

from pipeline.processing import Outcome, WorkOutcome, process_once

__all__ = ["Outcome", "WorkOutcome", "process_once"]
