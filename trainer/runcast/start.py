"""``init``: the options of a run resolved (with their environment defaults), the server asked
once, and the ``Run`` made, one named step each. See docs/sdk.md."""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

from . import runtime, system
from .handshake import Identity, InitError, whoami
from .init_options import MODES, InitOptions, Resolved, resolve, signature
from .run_handle import Run
from .sender.blob_http import BlobClient
from .sender.transport import Transport, make_transport, public_url
from .sender.upload_jobs import UploadConfig
from .wire import events
from .wire.events import new_id

log = logging.getLogger("runcast")

__all__ = ["MODES", "InitOptions", "init"]


def init(project: str | None = None, name: str | None = None, config: Any = None, *,
         options: InitOptions | None = None, **keywords: Any) -> Run:
    """Start broadcasting a run (or, with ``resume=RUN_ID``, a new segment of one). See docs/sdk.md.

    Every option is a keyword (``InitOptions`` documents each; ``options=InitOptions(...)`` gives
    them as one object, and keywords given beside it win).

    Online (the default), ``init`` asks the server once (``GET /api/v1/whoami``, at most
    ``start_timeout`` seconds): a refused token, a token of another project than ``project``
    or a run id another project holds raise ``InitError`` here (``on_error="warn"``: logged,
    and the run is recorded offline instead). An unreachable server is not an error: the run
    is spooled and sent when the server answers. ``mode``: ``online``; ``offline`` (nothing is
    sent: the run is written to the spool for ``runcast sync``); ``disabled`` (nothing is
    recorded; every verb returns at once).
    """
    settled = resolve(_options(project, name, config, options, keywords), os.environ)
    run_id, launch = _identify(settled)
    link = _connect(settled, run_id)
    try:
        started = _run_started(settled, run_id, link)
    except BaseException:
        if link.sink is not None:
            link.sink.close()
        raise
    run = _open_run(settled, run_id, launch, link, started)
    _start_sampler(settled, run, launch, link)
    return run


init.__signature__ = signature()  # type: ignore[attr-defined]  # help() and editors list every option


@dataclass(frozen=True)
class _Link:
    """Where this rank sends (nothing: ``sink`` None), and what the server said at ``init``."""

    sink: Transport | None
    base: str | None
    project: str | None
    resume_step: int | None
    limits: Identity

    @property
    def http(self) -> str | None:
        """The server's HTTP address when this rank sends to one."""
        return self.base if self.sink is not None and self.base and self.base.startswith("http") else None


def _options(project: str | None, name: str | None, config: Any, options: InitOptions | None,
             keywords: dict[str, Any]) -> InitOptions:
    """One ``InitOptions`` from ``init``'s arguments (a keyword it has no field for: TypeError naming it)."""
    fields = {f.name for f in dataclasses.fields(InitOptions)}
    unknown = sorted(set(keywords) - fields)
    if unknown:
        raise TypeError(f"init() got an unexpected keyword argument {unknown[0]!r}")
    given: dict[str, Any] = {k: v for k, v in (("project", project), ("name", name), ("config", config)) if v is not None}
    return dataclasses.replace(options or InitOptions(), **given, **keywords)


def _identify(r: Resolved) -> tuple[str, system.LaunchIdentity | None]:
    """The run's id, and the launch identity the ranks of one launch agree on (none for a disabled run)."""
    o = r.options
    launch = None if o.all_ranks or r.mode == "disabled" else system.launch_identity(o.resume or o.id)
    return (launch.run if launch is not None else o.resume or o.id or new_id()), launch


def _connect(r: Resolved, run_id: str) -> _Link:
    """The transport this rank sends with, after asking the server once (InitError when it refuses, unless
    ``on_error="warn"``: then nothing is sent and the run is recorded offline)."""
    o = r.options
    offline = _Link(None, None, o.project, o.resume_step, Identity(project="", run_exists=False, run_last_step=None))
    if not r.enabled or r.mode != "online":
        return offline
    sink, base = _transport(o)
    if sink is None:
        log.info("runcast: no server given (server= or RUNCAST_SERVER); the run is recorded offline")
        return offline
    if base is None or not base.startswith("http"):
        return dataclasses.replace(offline, sink=sink, base=base)
    try:
        project, resume_step, limits = _ask_server(base, o.token, o.project, run_id, o.resume, o.id, o.resume_step,
                                                   o.start_timeout)
    except InitError as exc:
        sink.close()
        if o.on_error == "raise":
            raise
        log.error("runcast: %s. The run is recorded offline instead; send it later with runcast sync", exc)
        return offline
    return _Link(sink, base, project, resume_step, limits)


def _transport(o: InitOptions) -> tuple[Transport | None, str | None]:
    """The transport and the address it sends to (None for an object given as ``transport=``)."""
    if isinstance(o.transport, str):
        return make_transport(o.transport, o.token), o.transport
    if o.transport is not None:
        return o.transport, None
    if o.server:
        return make_transport(o.server, o.token), o.server
    return None, None


def _run_started(r: Resolved, run_id: str, link: _Link) -> dict[str, Any]:
    """The fields of the run's first event, checked as the server will check them."""
    o = r.options
    project = link.project
    if project is None and not r.enabled:
        project = "disabled" if r.mode == "disabled" else "unknown"  # a run that sends nothing
    # project None: the server did not say (unreachable, offline): the run goes to the project of the
    # token that sends it, when it is sent (live, or by `runcast sync`).
    optional = {"alerts": o.alerts, "policy": o.policy, "tags": None if o.tags is None else list(o.tags),
                "group": o.group, "job_type": o.job_type, "notes": o.notes, "public_paths": o.public_paths or None}
    started: dict[str, Any] = {
        **({"project": project} if project is not None else {}),
        "name": o.name or f"run-{run_id[:8]}",
        "config": r.config,
        "code": {},
        "env": {},
        "seed": o.seed,
        "resume_step": link.resume_step,
        "visibility": o.visibility,
        **{k: v for k, v in optional.items() if v is not None},
    }
    checked = events.validate_event({"type": "run_started", "run": run_id, "segment": run_id, "seq": 0, "ts": 0,
                                     **started})
    for label in ("tags", "group", "job_type", "notes"):
        if label in started:
            started[label] = checked.get(label)
    if r.enabled:
        started["env"] = runtime.storable(runtime.environment(r.rank))
        started["code"] = runtime.storable(runtime.code_revision()) if o.capture_code else {}
    return started


def _open_run(r: Resolved, run_id: str, launch: system.LaunchIdentity | None, link: _Link,
              started: dict[str, Any]) -> Run:
    """The ``Run``, its sender started (for a rank that records)."""
    o = r.options
    publish = None
    if link.sink is not None and link.base and o.upload and r.checkpoint_dir is None:
        publish = UploadConfig(link.base, o.token, o.upload_bandwidth, o.retry_initial, o.retry_max)
    run = Run(
        run_id=run_id,
        started=started,
        url=_run_url(run_id, link.base if link.sink is not None else None, o.server, o.transport, r.enabled, launch,
                     r.mode),
        rank=r.rank,
        enabled=r.enabled,
        transport=link.sink,
        spool_dir=r.spool_dir,
        flush_interval=o.flush_interval,
        batch_size=min(o.batch_size, link.limits.max_batch_events),
        batch_bytes=link.limits.max_batch_bytes,
        columns=link.limits.columns,
        max_queue=o.max_queue,
        finish_timeout=o.finish_timeout,
        heartbeat_interval=o.heartbeat_interval,
        retry_initial=o.retry_initial,
        retry_max=o.retry_max,
        checkpoint_dir=r.checkpoint_dir,
        segment=launch.segment if launch is not None else None,
        disabled=r.mode == "disabled",
        upload=publish,
        blobs=BlobClient(link.http, o.token) if link.http else None,
    )
    run._api = (link.http, o.token) if link.http else None
    return run


def _start_sampler(r: Resolved, run: Run, launch: system.LaunchIdentity | None, link: _Link) -> None:
    """System metrics on every rank of an online launch (each sends its own samples)."""
    if not (r.enabled or launch is not None):
        return
    o = r.options
    # rank 0's init() decided whether its samples go to a server; another rank sends to the address given.
    url = None if r.mode != "online" or (r.enabled and link.sink is None) else next(
        (u for u in (o.server, o.transport) if isinstance(u, str) and u.startswith("http")), None)
    run._system = system.start(r.system_interval, run=run.id, segment=run.segment, rank=r.rank,
                               show_host=o.public_paths, url=url, token=o.token)


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


