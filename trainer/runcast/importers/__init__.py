"""Importers: other tools' training history as Runcast runs (``runcast import``).

Each format has a reader module that turns a source into ``SourceRun`` objects in
memory (``model``); ``registry`` recognises formats and dispatches; ``plan`` derives
ids, numbering and times, so that importing twice changes nothing; ``send`` delivers
the events to the ingest API; ``pipeline`` ties them together. Readers import their
tool's package (tensorboard, mlflow, wandb) only when used. docs/import.md has the
mapping rules of every format.
"""

from runcast.importers.model import ImportFailed, MissingExtra, SourceRun
from runcast.importers.pipeline import plan_all, read_all
from runcast.importers.plan import Target
from runcast.importers.registry import FORMATS, ReadOptions, detect
from runcast.importers.send import Limits, SendFailed, send

__all__ = [
    "FORMATS",
    "ImportFailed",
    "Limits",
    "MissingExtra",
    "ReadOptions",
    "SendFailed",
    "SourceRun",
    "Target",
    "detect",
    "plan_all",
    "read_all",
    "send",
]
