"""``InitOptions``: every option of ``runcast.init`` as one typed object, and ``resolve``, the one
step that merges the environment (``RUNCAST_*``, ``RANK``) into it and checks it. See docs/sdk.md."""

from __future__ import annotations

import dataclasses
import inspect
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from . import system
from .handshake import DEFAULT_START_TIMEOUT
from .sender.spool import default_dir
from .steps import checked_step
from .values import json_object
from .wire import events
from .wire.policy import check_policy

if TYPE_CHECKING:
    from .sender.transport import Transport

__all__ = ["MODES", "InitOptions", "Resolved", "resolve", "signature"]

MODES: Final = ("online", "offline", "disabled")


@dataclass(frozen=True)
class InitOptions:
    """The options of ``runcast.init`` (docs/sdk.md#runcastinit-options has the table).

    ``runcast.init(**keywords)`` builds one from its keywords; ``runcast.init(options=InitOptions(...))``
    takes one whole. ``None`` means "from the environment, else the default" where the table says so."""

    project: str | None = None
    """Project slug; ``RUNCAST_PROJECT``, else the token's project."""
    name: str | None = None
    """Display name; ``RUNCAST_NAME``, else ``run-<first 8 characters of the id>``."""
    config: Any = None
    """A dict, dataclass or ``argparse.Namespace``, stored as JSON."""
    server: str | None = None
    """``http(s)://host:port`` the run is sent to; ``RUNCAST_SERVER``."""
    transport: str | Transport | None = None
    """Instead of ``server``: an ``http(s)://`` URL or a ``runcast.sender.transport.Transport``."""
    token: str | None = None
    """The project's ingest token; ``RUNCAST_TOKEN``. Never written to disk."""
    mode: str | None = None
    """``online``, ``offline`` or ``disabled``; ``RUNCAST_MODE``, else ``online``."""
    on_error: str = "raise"
    """``warn``: a token or project the server refuses at ``init`` is logged and the run recorded offline."""
    id: str | None = None
    """The id of a new run (8-64 of ``A-Za-z0-9_-``); random by default."""
    resume: str | None = None
    """Continue this run in a new segment."""
    resume_step: int | None = None
    """With ``resume``: restart from the checkpoint of this step (default: after the stored last step)."""
    tags: Sequence[str] | None = None
    """Tags shown and filtered on the runs page; ``RUNCAST_TAGS`` (comma separated)."""
    group: str | None = None
    """A group (one sweep, one distributed job); ``RUNCAST_GROUP``."""
    job_type: str | None = None
    """Shown with the run."""
    notes: str | None = None
    """Shown with the run."""
    visibility: str = "public"
    """``public``, ``unlisted`` or ``private``."""
    seed: int | None = None
    """Recorded with the run."""
    dir: str | os.PathLike[str] | None = None
    """Where the run's spool lives; ``RUNCAST_SPOOL_DIR``, else ``~/.cache/runcast/spool``."""
    spool_dir: str | os.PathLike[str] | None = None
    """The same as ``dir`` (give one of them)."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    """Seconds ``init`` waits for the server's answer."""
    flush_interval: float = 0.0
    """0: send as soon as the sender is idle; else gather events for this many seconds."""
    batch_size: int = events.MAX_BATCH_EVENTS
    """At most this many events a batch (and at most what the server takes)."""
    max_queue: int = 100_000
    """Events held in memory before ``log()`` writes them to the overflow file."""
    finish_timeout: float = 30.0
    """Seconds ``finish()`` tries to deliver before spooling the rest."""
    all_ranks: bool = False
    """Send from every rank, not only rank 0."""
    capture_code: bool = True
    """Record the git revision and diff of the working directory."""
    rank: int | None = None
    """This process's rank; ``RANK``, else 0."""
    heartbeat_interval: float = 30.0
    """Seconds between liveness events."""
    retry_initial: float = 0.5
    """First back-off (seconds) between delivery attempts during an outage."""
    retry_max: float = 30.0
    """Longest back-off (seconds)."""
    alerts: dict[str, Any] | None = None
    """Per-run detector overrides (docs/alerts.md)."""
    checkpoint_dir: str | os.PathLike[str] | None = None
    """The server's storage directory as this machine sees it; ``RUNCAST_CHECKPOINT_DIR``."""
    public_paths: bool = False
    """Show paths, host, user and pid to every reader (not only the project's tokens)."""
    system_metrics: float | bool | None = None
    """Seconds between system samples; ``RUNCAST_SYSTEM_INTERVAL``, else 10; ``False`` for none."""
    upload: bool = True
    """With a ``server`` and no ``checkpoint_dir``: publish checkpoints over HTTP."""
    upload_bandwidth: float | None = None
    """Cap on the upload rate, bytes per second."""
    policy: Mapping[str, Any] | None = None
    """The run's publication policy (docs/sdk.md#publication-policy), sent with its first event."""


@dataclass(frozen=True)
class Resolved:
    """``InitOptions`` with the environment merged in and every value checked: what ``init`` runs on."""

    options: InitOptions
    mode: str
    rank: int
    enabled: bool
    """This process records the run: rank 0 (or ``all_ranks``) and not ``disabled``."""
    system_interval: float | None
    spool_dir: Path
    checkpoint_dir: Path | None
    config: dict[str, Any]
    """``options.config`` as the JSON object the run stores."""


def resolve(options: InitOptions, environ: Mapping[str, str]) -> Resolved:
    """The environment merged into ``options`` (an option given wins), then checked: ValueError names the option."""
    merged = _with_environment(options, environ)
    _check(merged)
    rank = merged.rank if merged.rank is not None else _env_rank(environ)
    mode = merged.mode or "online"
    spool = merged.dir if merged.dir is not None else merged.spool_dir
    return Resolved(
        options=merged,
        mode=mode,
        rank=rank,
        enabled=(rank == 0 or merged.all_ranks) and mode != "disabled",
        system_interval=system.interval_from(merged.system_metrics),
        spool_dir=Path(spool).expanduser() if spool is not None else default_dir(),
        checkpoint_dir=Path(merged.checkpoint_dir).expanduser().absolute() if merged.checkpoint_dir is not None else None,
        config=json_object(merged.config, "config"),
    )


_ENVIRONMENT: Final = {
    "project": "RUNCAST_PROJECT", "name": "RUNCAST_NAME", "mode": "RUNCAST_MODE", "group": "RUNCAST_GROUP",
    "server": "RUNCAST_SERVER", "token": "RUNCAST_TOKEN", "checkpoint_dir": "RUNCAST_CHECKPOINT_DIR",
}


def _with_environment(o: InitOptions, environ: Mapping[str, str]) -> InitOptions:
    tags = o.tags
    if tags is None and environ.get("RUNCAST_TAGS"):
        tags = [t.strip() for t in environ["RUNCAST_TAGS"].split(",") if t.strip()]
    seed = o.seed
    if seed is not None and not isinstance(seed, bool) and hasattr(seed, "__index__"):
        seed = operator.index(seed)  # numpy integers
    # an empty option or variable counts as not given (checkpoint_dir: only None does)
    named: dict[str, Any] = {field: getattr(o, field) or environ.get(variable) or None for field, variable in _ENVIRONMENT.items()}
    if o.checkpoint_dir is not None:
        named["checkpoint_dir"] = o.checkpoint_dir
    return dataclasses.replace(
        o,
        **named,
        tags=tags,
        seed=seed,
        resume_step=checked_step(o.resume_step, optional=True, field="resume_step"),
        alerts=json_object(o.alerts, "alerts") if o.alerts is not None else None,
        policy=check_policy(o.policy) if o.policy is not None else None,
    )


def _check(o: InitOptions) -> None:
    """ValueError naming the first option out of range (the order ``init`` has always checked them in)."""
    if (o.mode or "online") not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {o.mode!r}")
    if o.on_error not in ("raise", "warn"):
        raise ValueError(f"on_error must be 'raise' or 'warn', got {o.on_error!r}")
    if o.dir is not None and o.spool_dir is not None:
        raise ValueError("give dir= or spool_dir= (the same thing), not both")
    _check_numbers(o)
    _check_ids(o)
    if not isinstance(o.public_paths, bool):
        raise ValueError("public_paths must be True or False")  # noqa: TRY004  (init's documented error for a bad option)
    if o.tags is not None and (isinstance(o.tags, str) or not isinstance(o.tags, Sequence)):
        raise ValueError("tags must be a list of strings")


def _check_numbers(o: InitOptions) -> None:
    for label, seconds in (("heartbeat_interval", o.heartbeat_interval), ("retry_initial", o.retry_initial),
                           ("retry_max", o.retry_max), ("start_timeout", o.start_timeout)):
        if not _number(seconds) or not seconds > 0:
            raise ValueError(f"{label} must be a positive number of seconds")
    if not _number(o.flush_interval) or not o.flush_interval >= 0:
        raise ValueError("flush_interval must be 0 (send as soon as the sender is idle) or a positive number of seconds")
    if o.upload_bandwidth is not None and not (_number(o.upload_bandwidth) and o.upload_bandwidth > 0):
        raise ValueError("upload_bandwidth must be a positive number of bytes per second")
    if o.finish_timeout < 0:
        raise ValueError("finish_timeout must not be negative")
    for label, count in (("batch_size", o.batch_size), ("max_queue", o.max_queue)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{label} must be a positive integer")


def _check_ids(o: InitOptions) -> None:
    for label, given in (("resume", o.resume), ("id", o.id)):
        if given is not None and (not isinstance(given, str) or not events.ID_RE.match(given)):
            raise ValueError(f"{label} must be a run id (8-64 characters of A-Z, a-z, 0-9, '_' or '-')")
    if o.resume is not None and o.id is not None and o.resume != o.id:
        raise ValueError("give resume=ID to continue a run, or id=ID for a new one, not both")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _env_rank(environ: Mapping[str, str]) -> int:
    try:
        return int(environ.get("RANK", "0"))
    except ValueError:
        return 0


def signature(leading: Sequence[str] = ("project", "name", "config")) -> inspect.Signature:
    """``init``'s signature drawn from the fields (``leading`` positional too), so ``help`` and editors list them."""
    params = [
        inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD if f.name in leading
                          else inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in dataclasses.fields(InitOptions)
    ]
    params.sort(key=lambda p: p.kind)  # positional ones first (a stable sort keeps the fields' order)
    options = inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None,
                                annotation="InitOptions | None")
    return inspect.Signature([*params, options], return_annotation="Run")
