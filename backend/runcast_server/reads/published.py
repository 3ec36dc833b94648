"""What a viewer may see of client-sent text: one place, used by every read path.

Manifests (sample previews, file names) pass through the personal-data scrubber;
code diffs through the credentials scrubber. Routes that return event payloads or a
run's code (events, run detail, the live stream) call these on the way out, so a
client that did not scrub is still published scrubbed.
"""

from __future__ import annotations

from typing import Any

from runcast.scrub import scrub_credentials, scrub_tree


def published_code(code: dict[str, Any]) -> dict[str, Any]:
    """A code-revision record with credentials in its diff replaced by ``[SECRET]``."""
    diff = code.get("diff")
    if not isinstance(diff, str) or not diff:
        return code
    return {**code, "diff": scrub_credentials(diff)[0]}


def published_payload(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A timeline event's payload as served to viewers."""
    if kind == "manifest":
        return scrub_tree(payload)[0]
    if kind == "run_started" and isinstance(payload.get("code"), dict):
        return {**payload, "code": published_code(payload["code"])}
    return payload


# What a viewer outside the run's project sees of a private checkpoint (``public: false``).
PRIVATE_CHECKPOINT_FIELDS = ("metrics", "public", "status")


def visible_payload(kind: str, payload: dict[str, Any], *, private_ok: bool) -> dict[str, Any]:
    """``published_payload``, less a private checkpoint's file (path, size, sha256) unless the
    viewer holds a token of the run's project (``private_ok``)."""
    out = published_payload(kind, payload)
    if kind == "checkpoint" and not private_ok and out.get("public") is False:
        return {k: out[k] for k in PRIVATE_CHECKPOINT_FIELDS if k in out}
    return out
