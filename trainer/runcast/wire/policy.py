"""The publication policy: what the public sees of a run, one setting per kind of data.

Shared by the SDK (``runcast.init(policy=...)``, ``Run.set_policy``), the CLI and the
server, so all three accept and refuse the same settings. A policy is a JSON object;
every field is optional and a missing one falls back to the project's default, then to
``DEFAULT`` (everything public: what a run without a policy has always published).

==============  ===============================================================
field           values
==============  ===============================================================
``metrics``     ``"all"``, ``"none"``, or a list of key glob patterns (``"train/*"``)
``config``      ``"all"``, ``"none"``, or a list of top-level config keys (globs too)
``env``         ``"shown"`` | ``"hidden"``
``code``        ``"none"`` | ``"sha"`` (sha, branch, dirty) | ``"diff"`` (sha and diff)
``data_mix``    ``"shown"`` | ``"hidden"``
``manifests``   ``"none"`` | ``"summary"`` (version, step, counts) | ``"previews"``
                (the scrubbed manifest, as before)
``notes``       ``"shown"`` | ``"hidden"``
``checkpoints`` ``"none"`` | ``"metadata"`` (listed, not downloadable) | ``"downloadable"``
``alerts``      ``"public"`` | ``"team"``
``samples``     ``"shown"`` | ``"hidden"`` (text generations, docs/samples.md)
``evals``       ``"shown"`` | ``"hidden"`` (evaluation scores, on checkpoints too)
``media``       ``"shown"`` | ``"hidden"`` (images, tables, histograms)
``commands``    ``"shown"`` | ``"hidden"`` (the team's commands to the trainer and their
                acknowledgements, docs/commands.md)
``delay_s``     seconds (0..604800, default 0): the public sees the run as it was
                this long ago (the broadcast delay; one delay for the whole run)
==============  ===============================================================

The team (a token of the run's project) always sees everything, live.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Final

ALL: Final = "all"
NONE: Final = "none"
MAX_PATTERNS: Final = 256
MAX_PATTERN_CHARS: Final = 200

CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "env": ("shown", "hidden"),
    "code": ("none", "sha", "diff"),
    "data_mix": ("shown", "hidden"),
    "manifests": ("none", "summary", "previews"),
    "notes": ("shown", "hidden"),
    "checkpoints": ("none", "metadata", "downloadable"),
    "alerts": ("public", "team"),
    "samples": ("shown", "hidden"),
    "evals": ("shown", "hidden"),
    "media": ("shown", "hidden"),
    "commands": ("shown", "hidden"),
}
LISTS: Final = ("metrics", "config")  # "all", "none" or a list of glob patterns
DELAY: Final = "delay_s"
MAX_DELAY_S: Final = 604_800  # one week
FIELDS: Final = (*LISTS, *CHOICES, DELAY)

DEFAULT: Final[dict[str, Any]] = {
    "metrics": ALL, "config": ALL, "env": "shown", "code": "diff", "data_mix": "shown",
    "manifests": "previews", "notes": "shown", "checkpoints": "downloadable", "alerts": "public",
    "samples": "shown", "evals": "shown", "media": "shown", "commands": "shown", DELAY: 0,
}


class PolicyError(ValueError):
    """A setting the policy cannot hold; ``field`` names it (``policy.metrics``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _patterns(field: str, raw: Any, text: bool) -> str | list[str]:
    if raw in (ALL, NONE):
        return str(raw)
    if text and isinstance(raw, str):  # "train/*,loss" from a command line
        raw = [p.strip() for p in raw.split(",") if p.strip()]
    if not isinstance(raw, list) or not raw or len(raw) > MAX_PATTERNS:
        raise PolicyError(field, f"must be 'all', 'none' or a list of 1..{MAX_PATTERNS} key patterns")
    out: list[str] = []
    for p in raw:
        if not isinstance(p, str) or not p or len(p) > MAX_PATTERN_CHARS or any(ord(c) < 32 for c in p):
            raise PolicyError(field, f"each pattern must be 1..{MAX_PATTERN_CHARS} characters without control characters")
        if p not in out:
            out.append(p)
    return out


def _delay(field: str, raw: Any, text: bool) -> int | float:
    if text and isinstance(raw, str):  # "90" from a command line
        try:
            raw = float(raw.strip())
        except ValueError:
            raise PolicyError(field, f"must be a number of seconds, 0..{MAX_DELAY_S}") from None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= MAX_DELAY_S:
        raise PolicyError(field, f"must be a number of seconds, 0..{MAX_DELAY_S}")
    return int(raw) if float(raw).is_integer() else float(raw)


def check_policy(raw: Any, *, partial: bool = True, field: str = "policy", text: bool = True) -> dict[str, Any]:
    """The policy ``raw`` validated: known fields only, each a legal value (``None`` in a
    partial policy means "fall back to the default"). Raises ``PolicyError`` naming the field.

    ``text``: also take a command line's text (``"train/*,loss"``, ``"90"``) and convert it;
    ``False`` on the wire (the API's bodies, ``run_started``), which carries JSON values only:
    what the SDK and the command line send, having checked it here first."""
    if not isinstance(raw, Mapping):
        raise PolicyError(field, "must be an object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{field}.{key}"
        if key not in FIELDS:
            raise PolicyError(name, f"unknown setting; known: {', '.join(FIELDS)}")
        if value is None and partial:
            out[key] = None
        elif key in LISTS:
            out[key] = _patterns(name, value, text)
        elif key == DELAY:
            out[key] = _delay(name, value, text)
        elif value not in CHOICES[key]:
            raise PolicyError(name, f"must be one of {', '.join(CHOICES[key])}")
        else:
            out[key] = value
    return out


def effective(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """``DEFAULT`` overlaid with each layer in turn (a ``None`` value leaves the one below)."""
    out = dict(DEFAULT)
    for layer in layers:
        for key, value in (layer or {}).items():
            if value is not None and key in out:
                out[key] = value
    return out


def allows(setting: str | list[str], name: str) -> bool:
    """Whether a ``metrics`` or ``config`` setting publishes ``name``."""
    if setting == ALL:
        return True
    if setting == NONE:
        return False
    return any(fnmatch.fnmatchcase(name, p) for p in setting)


def put_policy(server: str, token: str | None, path: str, change: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """``PUT /api/v1<path>`` with ``change``; the server's answer. Raises ``PolicyError`` for a
    422 (naming the field) and ``RuntimeError`` for any other refusal or an unreachable server."""
    import httpx

    headers = {"User-Agent": "runcast-sdk", **({"Authorization": f"Bearer {token}"} if token else {})}
    url = f"{server.rstrip('/')}/api/v1{path}"
    try:
        response = httpx.put(url, json=dict(change), headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise RuntimeError(f"the policy was not changed: the server cannot be reached ({type(exc).__name__})") from exc
    try:
        body: dict[str, Any] = response.json()  # the API's answers are JSON objects
    except ValueError:
        body = {}
    if response.status_code == 422:
        error = body.get("error") or {}
        raise PolicyError(str(error.get("field") or "policy"), str(error.get("message") or "refused"))
    if response.status_code != 200:
        message = (body.get("error") or {}).get("message") or response.reason_phrase
        raise RuntimeError(f"the policy was not changed: HTTP {response.status_code} {message}")
    return body
