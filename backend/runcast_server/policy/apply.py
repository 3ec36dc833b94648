"""The one place a run's publication policy is applied: every public read path asks a ``View``.

A ``View`` is what one reader may see of one run: the team (a token of the run's project)
sees everything; anyone else sees what the run's policy publishes. Routes build it once
per request (``view_for``), the live stream once per frame batch (``public_view``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Final

from runcast.wire.events import TIMESTAMP_KEY
from runcast.wire.policy import DEFAULT, NONE, allows
from sqlalchemy.orm import Session

from runcast_server.core.errors import NotFound
from runcast_server.core.models import Project
from runcast_server.policy.delay import Horizon, horizon
from runcast_server.policy.store import run_policies, run_policy
from runcast_server.record.models import Run

# Which policy field decides whether a timeline event type is shown at all.
_EVENT_FIELD: Final = {"checkpoint": "checkpoints", "data_mix": "data_mix", "manifest": "manifests",
                       "note": "notes", "anomaly": "alerts",
                       "command": "commands"}
_HIDDEN: Final = {"checkpoints": "none", "data_mix": "hidden", "manifests": "none", "notes": "hidden", "alerts": "team",
                    "commands": "hidden"}
_SHA_FIELDS: Final = ("sha", "branch", "dirty")


@dataclass(frozen=True)
class View:
    """What one reader sees of one run (``team``: everything, live).

    ``horizon``: the run is published with a delay and some of it is not due yet; reads
    bound their queries by it (policy/delay.py). None: nothing is held back."""

    team: bool
    policy: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT))
    horizon: Horizon | None = None
    until: float | None = None  # a delayed view: now - delay_s (alerts are bounded by time)

    @property
    def delay_s(self) -> float:
        return 0 if self.team else float(self.policy.get("delay_s") or 0)

    # --- metrics -----------------------------------------------------------------------
    def metric(self, key: str) -> bool:
        if self.team:
            return True
        setting = self.policy["metrics"]
        # The steps' times go with any metric published: withheld only with every metric.
        return setting != NONE if key == TIMESTAMP_KEY else allows(setting, key)

    def require_metric(self, key: str) -> None:
        """A withheld key answers exactly as an unknown one."""
        if not self.metric(key):
            raise NotFound(f"metric {key!r}", field="key")

    def keys(self, keys: list[str]) -> list[str]:
        return keys if self.team else [k for k in keys if self.metric(k)]

    def by_key(self, values: dict[str, Any]) -> dict[str, Any]:
        """A mapping keyed by metric name (last values, summaries) without withheld keys."""
        return values if self.team else {k: v for k, v in values.items() if self.metric(k)}

    def points(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Stream point entries ``{"key", ...}`` without withheld keys."""
        return entries if self.team else [e for e in entries if self.metric(e["key"])]

    # --- run record --------------------------------------------------------------------
    def config(self, config: dict[str, Any]) -> dict[str, Any]:
        return config if self.team else {k: v for k, v in config.items() if allows(self.policy["config"], k)}

    def env(self, env: dict[str, Any]) -> dict[str, Any]:
        return env if self.team or self.policy["env"] == "shown" else {}

    def code(self, code: dict[str, Any]) -> dict[str, Any]:
        if self.team or self.policy["code"] == "diff":
            return code
        if self.policy["code"] == "sha":
            return {k: code[k] for k in _SHA_FIELDS if k in code}
        return {}

    @property
    def code_diff(self) -> bool:
        return self.team or self.policy["code"] == "diff"

    @property
    def code_shown(self) -> bool:
        return self.team or self.policy["code"] != "none"

    # --- timeline ------------------------------------------------------------------------
    def event_shown(self, kind: str) -> bool:
        name = _EVENT_FIELD.get(kind)
        return self.team or name is None or self.policy[name] != _HIDDEN[name]

    def shown(self, kind: str, payload: dict[str, Any]) -> bool:
        """Whether this event is published: its kind, and an anomaly's metric."""
        if not self.event_shown(kind):
            return False
        return kind != "anomaly" or self.alert(payload)

    def hidden_event_types(self) -> list[str]:
        """Event types this reader never sees (for SQL filters, so pages stay full)."""
        return [] if self.team else sorted(k for k in _EVENT_FIELD if not self.event_shown(k))

    def payload(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """An event's payload as published (the event must be ``event_shown``)."""
        if self.team:
            return payload
        if kind == "run_started":
            out = dict(payload)
            for name, fn in (("config", self.config), ("env", self.env), ("code", self.code)):
                if isinstance(payload.get(name), dict):
                    out[name] = fn(payload[name])
            return out
        if kind == "manifest" and self.policy["manifests"] == "summary":
            return manifest_summary(payload)
        if kind == "checkpoint" and isinstance(payload.get("metrics"), dict):
            return {**payload, "metrics": self.by_key(payload["metrics"])}
        return payload

    def events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Event objects ``{"type", "payload", ...}``: withheld ones dropped, payloads filtered."""
        return [{**e, "payload": self.payload(e["type"], e["payload"])} for e in events if self.shown(e["type"], e["payload"])]

    # --- what the model says and scores (outputs/, docs/samples.md) --------------------
    def output_shown(self, kind: str) -> bool:
        """Whether ``samples``, ``evals`` or ``media`` (each a policy kind of its own) are published."""
        return self.team or self.policy[kind] != "hidden"

    def outputs(self, kind: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of one kind (``samples``, ``evals``, ``media``), or none when the kind is withheld."""
        return entries if self.output_shown(kind) else []

    # --- artifacts, alerts ---------------------------------------------------------------------
    def require(self, kind: str) -> None:
        """``NotFound`` (as an unknown id) when ``kind`` (checkpoint, data_mix, manifest, note, anomaly) is withheld."""
        if not self.event_shown(kind):
            raise NotFound(kind, field=kind)

    def require_download(self) -> None:
        """Checkpoint files only when the policy makes them downloadable."""
        if not (self.team or self.policy["checkpoints"] == "downloadable"):
            raise NotFound("checkpoint", field="checkpoint")

    def require_previews(self) -> None:
        """A manifest's content only with ``manifests: previews``."""
        if not (self.team or self.policy["manifests"] == "previews"):
            raise NotFound("manifest", field="manifest")

    @property
    def alerts(self) -> bool:
        return self.team or self.policy["alerts"] == "public"

    def alert(self, alert: dict[str, Any]) -> bool:
        """Whether an alert (or anomaly payload) is published: alerts public, and its metric too."""
        key = alert.get("key")
        return self.alerts and (not isinstance(key, str) or not key or self.metric(key))

    def notified(self, alert: dict[str, Any]) -> bool:
        """Whether subscribers (the public) are sent the alert: published, and the run not delayed.
        A delayed run's alerts reach the public only through its reads, when due (docs/alerts.md)."""
        return self.alert(alert) and self.delay_s <= 0

    @property
    def key(self) -> str:
        """This view's policy as a string (frames remember the policy they were built under)."""
        return json.dumps(self.policy, sort_keys=True)

    def withheld(self) -> dict[str, Any]:
        """The public policy's departures from everything-public (the run page names them)."""
        return {} if self.team else {k: v for k, v in self.policy.items() if v != DEFAULT[k]}


TEAM: Final = View(team=True)


def manifest_summary(payload: dict[str, Any]) -> dict[str, Any]:
    """A manifest event's payload reduced to its version, step and counts: no names, previews or files."""
    manifest = payload.get("manifest")
    content: dict[str, Any] = manifest if isinstance(manifest, dict) else {}
    sources = content.get("sources")
    files = content.get("files") or content.get("shards")
    out: dict[str, Any] = {"summary": True}
    for key in ("version", "step"):
        if key in payload:
            out[key] = payload[key]
    if isinstance(sources, (dict, list)):
        out["sources"] = len(sources)
    if isinstance(files, list):
        out["files"] = len(files)
    return out


def is_team(run: Run, viewer: Project | None) -> bool:
    return viewer is not None and viewer.id == run.project_id


def public_view(session: Session, run: Run, now: float | None = None) -> View:
    """What anyone outside the run's project sees (as of ``now``, for a delayed run)."""
    policy = run_policy(session, run)
    return _public(session, run, policy, now)


def _public(session: Session, run: Run, policy: dict[str, Any], now: float | None) -> View:
    delay = float(policy.get("delay_s") or 0)
    now = time.time() if now is None else now
    bound = horizon(session, run, delay, now) if delay > 0 else None
    return View(team=False, policy=policy, horizon=bound, until=now - delay if delay > 0 else None)


def view_for(session: Session, run: Run, viewer: Project | None) -> View:
    """What ``viewer`` (None: anonymous) sees of ``run``."""
    return TEAM if is_team(run, viewer) else public_view(session, run)


def views_for(session: Session, runs: list[Run], viewer: Project | None) -> dict[str, View]:
    """``view_for`` of each of ``runs`` (a page of the run list)."""
    policies = run_policies(session, [r for r in runs if not is_team(r, viewer)])
    now = time.time()
    return {r.id: _public(session, r, policies[r.id], now) if r.id in policies else TEAM for r in runs}


def public_policy(session: Session, run_id: str) -> View:
    """The public policy of a run known by id, without a delay horizon (the live stream holds
    back frames itself, live/fanout.py); everything for an unknown run."""
    run = session.get(Run, run_id)
    return TEAM if run is None else View(team=False, policy=run_policy(session, run))
