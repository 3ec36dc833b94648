"""``init``: the arguments of a run (and their environment defaults) checked, the server asked
once, and the ``Run`` made. See docs/sdk.md."""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from . import events, runtime, system
from .blob_http import BlobClient
from .events import new_id
from .handshake import DEFAULT_START_TIMEOUT, Identity, InitError, whoami
from .policy import check_policy
from .run import Run
from .spool import default_dir
from .steps import checked_step
from .transport import Transport, make_transport, public_url
from .upload_jobs import UploadConfig
from .values import json_object

log = logging.getLogger("runcast")

__all__ = ["MODES", "init"]


MODES: Final = ("online", "offline", "disabled")


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    *,
    server: str | None = None,
    transport: str | Transport | None = None,
    token: str | None = None,
    mode: str | None = None,
    on_error: str = "raise",
    id: str | None = None,
    resume: str | None = None,
    resume_step: int | None = None,
    tags: Sequence[str] | None = None,
    group: str | None = None,
    job_type: str | None = None,
    notes: str | None = None,
    visibility: str = "public",
    seed: int | None = None,
    dir: str | os.PathLike[str] | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    flush_interval: float = 0.0,
    batch_size: int = events.MAX_BATCH_EVENTS,
    max_queue: int = 100_000,
    finish_timeout: float = 30.0,
    all_ranks: bool = False,
    capture_code: bool = True,
    rank: int | None = None,
    heartbeat_interval: float = 30.0,
    retry_initial: float = 0.5,
    retry_max: float = 30.0,
    alerts: dict[str, Any] | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    public_paths: bool = False,
    system_metrics: float | bool | None = None,
    upload: bool = True,
    upload_bandwidth: float | None = None,
    policy: Mapping[str, Any] | None = None,
) -> Run:
    """Start broadcasting a run (or, with ``resume=RUN_ID``, a new segment of one). See docs/sdk.md.

    Online (the default), ``init`` asks the server once (``GET /api/v1/whoami``, at most
    ``start_timeout`` seconds): a refused token, a token of another project than ``project``
    or a run id another project holds raise ``InitError`` here (``on_error="warn"``: logged,
    and the run is recorded offline instead). An unreachable server is not an error: the run
    is spooled and sent when the server answers. ``project`` defaults to ``RUNCAST_PROJECT``,
    then to the token's project; ``name`` to ``RUNCAST_NAME``, then to ``run-<id>``.

    ``mode``: ``online``; ``offline`` (nothing is sent: the run is written to the spool for
    ``runcast sync``); ``disabled`` (nothing is recorded; every verb returns at once). Default:
    ``RUNCAST_MODE`` or ``online``. ``id``: the id of a new run (8-64 characters of
    A-Za-z0-9_-); ``resume=ID`` continues run ID after its stored last step (``resume_step=N``
    to restart from the checkpoint of step N instead: the steps after N are the abandoned branch). ``tags`` (``RUNCAST_TAGS``, comma
    separated), ``group`` (``RUNCAST_GROUP``), ``job_type`` and ``notes`` are shown on the
    runs page, which filters by tag and group. ``dir`` (or ``spool_dir``): where the run's
    spool lives (default ``RUNCAST_SPOOL_DIR`` or ``~/.cache/runcast/spool``).

    ``public_paths``: show this run's filesystem paths, host name, user and process id to
    every reader (by default only readers with a token of the run's project see them).
    ``checkpoint_dir`` (or ``RUNCAST_CHECKPOINT_DIR``): the storage directory the server
    serves checkpoints from, as this machine sees it; checkpoints saved elsewhere are
    copied into it off the training thread (``Run.checkpoint``, docs/artifacts.md).

    ``policy``: the run's publication policy (what the public sees of it, ``runcast.policy``;
    docs/sdk.md#publication-policy), sent with the run's first event so that no data is
    published before it; ``Run.set_policy`` changes it later.

    ``system_metrics``: seconds between system samples on every rank (default
    ``RUNCAST_SYSTEM_INTERVAL`` or 10; ``False`` for none), ``runcast.system``.

    ``upload`` (without ``checkpoint_dir``, with a ``server``): checkpoints are published to
    the server over HTTP on a worker thread of their own, unless the server finds the very
    bytes in its storage; ``upload_bandwidth`` caps the sending in bytes per second.
    """
    project = project or os.environ.get("RUNCAST_PROJECT") or None
    name = name or os.environ.get("RUNCAST_NAME") or None
    mode = mode or os.environ.get("RUNCAST_MODE") or "online"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if on_error not in ("raise", "warn"):
        raise ValueError(f"on_error must be 'raise' or 'warn', got {on_error!r}")
    if tags is None and os.environ.get("RUNCAST_TAGS"):
        tags = [t.strip() for t in os.environ["RUNCAST_TAGS"].split(",") if t.strip()]
    group = group or os.environ.get("RUNCAST_GROUP") or None
    if dir is not None and spool_dir is not None:
        raise ValueError("give dir= or spool_dir= (the same thing), not both")
    spool_dir = dir if dir is not None else spool_dir
    server = server or os.environ.get("RUNCAST_SERVER") or None
    if checkpoint_dir is None:
        checkpoint_dir = os.environ.get("RUNCAST_CHECKPOINT_DIR") or None
    token = token or os.environ.get("RUNCAST_TOKEN") or None
    if rank is None:
        rank = _env_rank()
    enabled = (rank == 0 or all_ranks) and mode != "disabled"
    _check_positive(heartbeat_interval=heartbeat_interval, retry_initial=retry_initial, retry_max=retry_max,
                    start_timeout=start_timeout)
    if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) or not flush_interval >= 0:
        raise ValueError("flush_interval must be 0 (send as soon as the sender is idle) or a positive number of seconds")
    if upload_bandwidth is not None and not (isinstance(upload_bandwidth, (int, float)) and upload_bandwidth > 0):
        raise ValueError("upload_bandwidth must be a positive number of bytes per second")
    if finish_timeout < 0:
        raise ValueError("finish_timeout must not be negative")
    for label, number in (("batch_size", batch_size), ("max_queue", max_queue)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError(f"{label} must be a positive integer")
    for label, given in (("resume", resume), ("id", id)):
        if given is not None and (not isinstance(given, str) or not events.ID_RE.match(given)):
            raise ValueError(f"{label} must be a run id (8-64 characters of A-Z, a-z, 0-9, '_' or '-')")
    if resume is not None and id is not None and resume != id:
        raise ValueError("give resume=ID to continue a run, or id=ID for a new one, not both")
    system_interval = system.interval_from(system_metrics)
    # The ranks of one launch agree on the ids; a disabled run has none to agree on.
    launch = None if all_ranks or mode == "disabled" else system.launch_identity(resume or id)
    run_id = launch.run if launch is not None else resume or id or new_id()
    if seed is not None and not isinstance(seed, bool) and hasattr(seed, "__index__"):
        seed = operator.index(seed)  # numpy integers
    resume_step = checked_step(resume_step, optional=True, field="resume_step")

    sink: Transport | None = None
    base: str | None = None
    limits = Identity(project="", run_exists=False, run_last_step=None)  # batch limits until the server says
    if enabled and mode == "online":
        if isinstance(transport, str):
            sink = make_transport(transport, token)
            base = transport
        elif transport is not None:
            sink = transport
        elif server:
            sink = make_transport(server, token)
            base = server
        if sink is not None and base is not None and base.startswith("http"):
            try:
                project, resume_step, limits = _ask_server(base, token, project, run_id, resume, id, resume_step,
                                                           start_timeout)
            except InitError as exc:
                if on_error == "raise":
                    sink.close()
                    raise
                log.error("runcast: %s. The run is recorded offline instead; send it later with runcast sync", exc)
                sink.close()
                sink, base = None, None
        elif sink is None:
            log.info("runcast: no server given (server= or RUNCAST_SERVER); the run is recorded offline")
    if project is None and not enabled:
        project = "disabled" if mode == "disabled" else "unknown"  # a run that sends nothing
    # project None: the server did not say (unreachable, offline): the run goes to the project of the
    # token that sends it, when it is sent (live, or by `runcast sync`).
    started: dict[str, Any] = {
        **({"project": project} if project is not None else {}),
        "name": name or f"run-{run_id[:8]}",
        "config": json_object(config, "config"),
        "code": {},
        "env": {},
        "seed": seed,
        "resume_step": resume_step,
        "visibility": visibility,
    }
    if alerts is not None:  # per-run detector overrides (docs/alerts.md)
        started["alerts"] = json_object(alerts, "alerts")
    if not isinstance(public_paths, bool):
        raise ValueError("public_paths must be True or False")  # noqa: TRY004  (init's documented error for a bad option)
    if public_paths:
        started["public_paths"] = True
    if policy is not None:
        started["policy"] = check_policy(policy)
    if tags is not None:
        if isinstance(tags, str) or not isinstance(tags, Sequence):
            raise ValueError("tags must be a list of strings")
        started["tags"] = list(tags)
    for label, text in (("group", group), ("job_type", job_type), ("notes", notes)):
        if text is not None:
            started[label] = text
    checked = events.validate_event({"type": "run_started", "run": run_id, "segment": run_id, "seq": 0, "ts": 0,
                                     **started})
    for label in ("tags", "group", "job_type", "notes"):
        if label in started:
            started[label] = checked.get(label)
    if enabled:
        started["env"] = runtime.storable(runtime.environment(rank))
        started["code"] = runtime.storable(runtime.code_revision()) if capture_code else {}
    publish = None
    if sink is not None and base and upload and checkpoint_dir is None:
        publish = UploadConfig(base, token, upload_bandwidth, retry_initial, retry_max)
    run = Run(
        run_id=run_id,
        started=started,
        url=_run_url(run_id, base if sink is not None else None, server, transport, enabled, launch, mode),
        rank=rank,
        enabled=enabled,
        transport=sink,
        spool_dir=Path(spool_dir).expanduser() if spool_dir is not None else default_dir(),
        flush_interval=flush_interval,
        batch_size=min(batch_size, limits.max_batch_events),
        batch_bytes=limits.max_batch_bytes,
        max_queue=max_queue,
        finish_timeout=finish_timeout,
        heartbeat_interval=heartbeat_interval,
        retry_initial=retry_initial,
        retry_max=retry_max,
        checkpoint_dir=Path(checkpoint_dir).expanduser().absolute() if checkpoint_dir is not None else None,
        segment=launch.segment if launch is not None else None,
        disabled=mode == "disabled",
        upload=publish,
        blobs=BlobClient(base, token) if sink is not None and base and base.startswith("http") else None,
    )
    run._api = (base, token) if sink is not None and base and base.startswith("http") else None
    if enabled or launch is not None:
        # Every rank of an online launch sends its own samples; rank 0's init() decided for it alone.
        sampler_url = None if mode != "online" or (enabled and sink is None) else next(
            (u for u in (server, transport) if isinstance(u, str) and u.startswith("http")), None)
        run._system = system.start(system_interval, run=run_id, segment=run.segment, rank=rank,
                                   show_host=public_paths, url=sampler_url, token=token)
    return run


def _run_url(run_id: str, base: str | None, server: str | None, transport: object, enabled: bool,
             launch: object, mode: str | None) -> str | None:
    """The run's page: from the server this rank sends to, or for a rank that sends nothing, from
    the address rank 0 sends to when a launch identity makes both ranks' run the same one."""
    if base is None and not enabled and launch is not None and mode == "online":
        base = next((u for u in (server, transport) if isinstance(u, str) and u.startswith("http")), None)
    return f"{public_url(base.rstrip('/'))}/runs/{run_id}" if base else None


def _ask_server(
    base: str,
    token: str | None,
    project: str | None,
    run_id: str,
    resume: str | None,
    new_id: str | None,
    resume_step: int | None,
    timeout: float,
) -> tuple[str | None, int | None, Identity]:
    """The project, resume step and the server's answer (its batch limits) after asking it (InitError when it
    refuses)."""
    who = whoami(base, token, run_id if (resume or new_id) else None, timeout)
    if who is None:  # unreachable: not an error
        if resume is not None and resume_step is None:
            log.warning("runcast: cannot ask where run %s stopped; it continues from step 0 of a new segment "
                        "(pass resume_step= to say where)", resume)
        return project, resume_step, Identity(project="", run_exists=False, run_last_step=None)
    if project is not None and project != who.project:
        raise InitError(f"the token is for project {who.project!r}, not {project!r}: use a token of {project!r} "
                        f"(runcast token create --project {project}) or leave project= out")
    if new_id is not None and who.run_exists:
        raise InitError(f"run {new_id!r} exists already: pass resume={new_id!r} to continue it")
    if resume is not None and resume_step is None and who.run_exists:
        resume_step = 0 if who.run_last_step is None else who.run_last_step
    return who.project, resume_step, who


def _check_positive(**numbers: float) -> None:
    for label, number in numbers.items():
        if not isinstance(number, (int, float)) or isinstance(number, bool) or not number > 0:
            raise ValueError(f"{label} must be a positive number of seconds")


def _env_rank() -> int:
    raw = os.environ.get("RANK", "0")
    try:
        return int(raw)
    except ValueError:
        return 0
