"""What a viewer may see of client-sent data: one place, used by every read path.

Two rules apply to everything a run sent (config, environment, code revision, timeline
event payloads, manifests):

* **Scrubbing, for everyone.** Manifests (sample previews, file names) pass through the
  personal-data scrubber; code diffs through the credentials scrubber.
* **Where the run ran, for its own readers only.** Unless the reader ``sees_everything``
  (presents a token of the run's project, or the run opted in with
  ``runcast.init(public_paths=True)``), filesystem paths, the host name, the user name and
  the process id are withheld: checkpoints show their file name (with size and sha256),
  the environment's host fields are replaced by ``WITHHELD``, and so is every config,
  environment or manifest value that looks like an absolute or home path, and under a
  path-like key (``out_dir``, ``data_path``, ``root``, ...) every value of several parts (a
  bare file name stays); a note's absolute paths become ``[path]``.
* **Private checkpoints, for the project only.** A checkpoint recorded with
  ``public: false`` shows only its metrics, status and ``public`` flag to anyone without a
  token of the run's project, whatever the run opted in to.

Routes that return run data (run detail, events, checkpoints, alerts, feeds, cards,
manifests, revisions, the live stream) and notifications call these on the way out, so a
client that did not scrub is still published scrubbed.
"""

from __future__ import annotations

import re
from typing import Any, Final

from runcast.wire.scrub import scrub_credentials, scrub_tree

from runcast_server.core.models import Project
from runcast_server.record.models import Run

WITHHELD: Final = "[withheld]"
PATH_TAG: Final = "[path]"

# Environment fields that say which machine, user and process a run ran as.
HOST_KEYS: Final = frozenset({
    "host", "hostname", "node", "nodename", "fqdn", "ip", "user", "username", "login", "uid", "gid",
    "pid", "ppid", "cwd", "home", "executable", "argv", "command", "cmdline",
})
# Keys whose values are paths whatever they look like: out_dir, data_path, log_file, root, cwd ...
_PATH_KEY = re.compile(r"(?:^|[_\-. ])(?:dir|dirs|directory|path|paths|folder|root|cwd|home|file)$", re.IGNORECASE)
# A whole value that is a path: /abs, ~ or ~user/..., C:\ or C:/, \\server\share, file://...
_PATH_VALUE = re.compile(r"^(?:/|~[\w.-]*(?:/|$)|[A-Za-z]:[\\/]|\\\\|file:)", re.IGNORECASE)
# An absolute or home path of two or more parts inside text ("saved to /home/a/ckpt.pt").
_EMBEDDED_PATH = re.compile(r"(?<![\w.:/~\\-])(?:~[\w.-]*)?/[\w.@+-]+(?:/[^\s\"'<>`|;,)]*)+")


def is_project_reader(run: Run, viewer: Project | None) -> bool:
    """Whether the reader holds a token of the run's project (sees private checkpoints' files)."""
    return viewer is not None and viewer.id == run.project_id


def sees_everything(run: Run, viewer: Project | None) -> bool:
    """Whether this reader gets the run's paths, host and process fields: a reader with a
    token of the run's project, or anyone when the run opted in (``public_paths``)."""
    return bool(run.public_paths) or is_project_reader(run, viewer)


def looks_like_path(text: str) -> bool:
    """A string that is, or contains, an absolute or home filesystem path."""
    return bool(_PATH_VALUE.match(text.strip()) or _EMBEDDED_PATH.search(text))


def _has_parts(text: str) -> bool:
    """A relative path of several parts (``data/train``, ``out\\ckpt``), not a bare name."""
    return "/" in text or "\\" in text


def withhold_paths(value: Any, *, keys: bool = True, under_path_key: bool = False) -> Any:
    """``value`` with path-like strings replaced by ``WITHHELD`` (recursively), judged by the value:
    strings that look like absolute or home paths, and with ``keys``, under a path-like key, every
    string of more than one part (``data/shard``); a bare file name (``train.jsonl``), numbers,
    booleans and nulls stay, so a config keeps its shape."""
    if isinstance(value, str):
        return WITHHELD if looks_like_path(value) or (under_path_key and _has_parts(value)) else value
    if isinstance(value, dict):
        return {k: withhold_paths(v, keys=keys, under_path_key=under_path_key or (keys and bool(_PATH_KEY.search(str(k)))))
                for k, v in value.items()}
    if isinstance(value, list):
        return [withhold_paths(v, keys=keys, under_path_key=under_path_key) for v in value]
    return value


def path_key(key: str) -> bool:
    """Whether values under ``key`` are paths whatever they look like (``out_dir``, ``data_path``)."""
    return bool(_PATH_KEY.search(key))


def published_config(config: dict[str, Any], full: bool) -> dict[str, Any]:
    """A run's config: path-like values withheld unless ``full``."""
    return config if full else withhold_paths(config)


def published_env(env: dict[str, Any], full: bool) -> dict[str, Any]:
    """A run's environment: host, user, process and path fields withheld unless ``full``."""
    if full:
        return env
    return {k: WITHHELD if str(k).lower() in HOST_KEYS else withhold_paths(v, under_path_key=bool(_PATH_KEY.search(str(k))))
            for k, v in env.items()}


def published_remote(remote: Any, full: bool) -> Any:
    """A git remote: one that is a local path withheld unless ``full``."""
    return WITHHELD if not full and isinstance(remote, str) and looks_like_path(remote) else remote


def published_code(code: dict[str, Any], full: bool = False) -> dict[str, Any]:
    """A code-revision record: credentials in its diff replaced by ``[SECRET]``; a remote
    that is a local path withheld unless ``full``."""
    out = dict(code)
    diff = code.get("diff")
    if isinstance(diff, str) and diff:
        out["diff"] = scrub_credentials(diff)[0]
    if "remote" in code:
        out["remote"] = published_remote(code["remote"], full)
    return out


def file_name(path: Any) -> str:
    """The last part of a recorded path (POSIX or Windows separators)."""
    return str(path or "").replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


# What a viewer outside the run's project sees of a private checkpoint (``public: false``).
PRIVATE_CHECKPOINT_FIELDS: Final = ("metrics", "public", "status")


def published_checkpoint(payload: dict[str, Any], full: bool, private_ok: bool = False) -> dict[str, Any]:
    """A checkpoint record: its ``filename`` always; its recorded ``path`` only when ``full``;
    of a private checkpoint (``public: false``) only ``PRIVATE_CHECKPOINT_FIELDS`` unless the
    viewer holds a token of the run's project (``private_ok``)."""
    if payload.get("public") is False and not private_ok:
        return {k: payload[k] for k in PRIVATE_CHECKPOINT_FIELDS if k in payload}
    out = {k: v for k, v in payload.items() if full or k != "path"}
    out["filename"] = file_name(payload.get("path"))
    return out


def published_manifest(manifest: Any, full: bool) -> tuple[Any, dict[str, int]]:
    """A manifest (or any tree made from one): scrubbed, and unless ``full`` absolute paths
    withheld (relative file names stay: they are what a manifest lists); and the counts of
    what the scrubber replaced."""
    out, counts = scrub_tree(manifest)
    return (out if full else withhold_paths(out, keys=False)), dict(counts)


def published_note(text: str, full: bool) -> str:
    """An operator's note: absolute and home paths in it become ``[path]`` unless ``full``."""
    return text if full else _EMBEDDED_PATH.sub(PATH_TAG, text)


def published_payload(kind: str, payload: dict[str, Any], full: bool = False, private_ok: bool = False) -> dict[str, Any]:
    """A timeline event's payload as served to a reader (``full``: see ``sees_everything``;
    ``private_ok``: see ``is_project_reader``)."""
    if kind == "manifest":
        return published_manifest(payload, full)[0]
    if kind == "checkpoint":
        return published_checkpoint(payload, full, private_ok)
    if kind == "note" and isinstance(payload.get("text"), str):
        return {**payload, "text": published_note(payload["text"], full)}
    if kind == "run_started":
        out = dict(payload)
        if isinstance(payload.get("code"), dict):
            out["code"] = published_code(payload["code"], full)
        if isinstance(payload.get("config"), dict):
            out["config"] = published_config(payload["config"], full)
        if isinstance(payload.get("env"), dict):
            out["env"] = published_env(payload["env"], full)
        return out
    return payload

