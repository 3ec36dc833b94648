"""Server configuration, read from ``RUNCAST_*`` environment variables.

``Settings()`` reads the environment; only a process's entry points do (``create_app``'s
default, the Celery app when nobody configured it, the CLI's commands), once, and pass
the object on (``context.AppContext``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runcast_server.core import shipped

# One source of a CSP frame-ancestors list: a keyword, a scheme, or a host with optional scheme, port, path.
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:\d+)?|https?://\[[0-9A-Fa-f:.]+\](:\d+)?")
_CSP_SOURCE = re.compile(r"'self'|'none'|\*|[a-z][a-z0-9+.-]*:|([a-z][a-z0-9+.-]*://)?(\*\.)?[A-Za-z0-9.-]+(:(\d+|\*))?(/[A-Za-z0-9._~/-]*)?")


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "runcast"


class OidcProvider(BaseModel):
    """One OpenID Connect provider people may sign in with (docs/auth.md#openid-connect)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$", description="Its id in URLs: the redirect URI to "
                      "register is <public URL>/api/v1/session/oidc/<name>/callback.")
    display_name: str = Field(max_length=100, description="What the sign-in button says: 'Sign in with <display_name>'.")
    issuer: str = Field(pattern=r"^https?://", description="The issuer URL; its /.well-known/openid-configuration "
                        "is read for the endpoints and keys.")
    client_id: str
    client_secret: SecretStr
    scope: str = Field(default="openid profile email", description="The scopes asked for ('openid' among them).")


class Settings(BaseSettings):
    """Every option has a working default: with none set, Runcast runs embedded
    (SQLite in WAL mode under ``data_dir``, Celery tasks run eagerly in the API
    process, an in-process hub for live messages)."""

    model_config = SettingsConfigDict(
        env_prefix="RUNCAST_", env_file=None, extra="ignore"
    )

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded database and files live.",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: SQLite under data_dir."
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for the Celery broker and live pub/sub; unset = embedded mode.",
    )
    host: str = "127.0.0.1"
    port: int = 8000
    public_url: str | None = Field(
        default=None, description="The address viewers use, for links in messages."
    )
    ingest_task_expires_s: float = Field(
        default=24 * 3600,
        description="An ingest task not run within this is discarded.",
    )
    broker_visibility_timeout_s: int = Field(
        default=3600, description="Redelivery of an unacknowledged task after this."
    )
    # --- the live stream (docs/live.md): RUNCAST_STREAM_*, read by live/ (the context's Settings) ---
    stream_replay_max_versions: int = Field(default=1000, ge=1, description="A resume further behind gets `event: reset`.")
    stream_replay_max_points: int = Field(
        default=100_000, ge=1, description="... as does one whose versions hold more points."
    )
    stream_keepalive_s: float = Field(default=15.0, gt=0, description="A comment line after this long without a message.")
    stream_poll_s: float = Field(
        default=5.0, gt=0, description="A run's channel re-reads its version this often (missed doorbells)."
    )
    stream_viewer_queue: int = Field(
        default=256, ge=1, description="Messages a viewer may fall behind before it is dropped."
    )
    stream_send_timeout_s: float = Field(
        default=30.0, gt=0, description="A write a client does not take in this long ends its stream."
    )
    stream_recent_frames: int = Field(
        default=256, ge=0, description="Messages a channel keeps to resume viewers without the database."
    )
    stream_linger_s: float = Field(default=10.0, ge=0, description="A channel without viewers stays subscribed this long.")
    broadcast_piece_versions: int = Field(
        default=32, ge=1, le=1000,
        description="Run versions per sealed piece of the cacheable broadcast (part of its URLs' contract).",
    )

    # --- the ingest inbox (docs/ingest.md) ---
    inbox_redeliver_after_s: float = Field(
        default=30.0, gt=0,
        description="A batch accepted this long ago and still not stored is enqueued again by the sweeper "
        "(then after twice as long, and so on, up to 10 minutes).",
    )
    inbox_sweep_interval_s: float = Field(
        default=10.0, gt=0, description="How often the inbox sweeper runs (Celery beat, or a timer when embedded)."
    )
    inbox_retention_s: float = Field(
        default=24 * 3600, ge=0, description="Stored batches' inbox rows (without their body) are deleted after this."
    )
    ingest_retry_max_s: float = Field(
        default=60.0, gt=0, description="Cap of the ingest task's back-off while the database is unavailable."
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1, description="Largest ingest request body accepted."
    )
    min_free_bytes: int = Field(
        default=128 * 1024 * 1024, ge=0,
        description="With the embedded SQLite database: below this much free space on its filesystem, ingest "
        "answers 503 (Retry-After) and /readyz 503 (check 'disk'). 0: never.",
    )
    max_request_bytes: int = Field(
        default=64 * 1024, ge=1, description="Largest request body of every other route."
    )
    vendor_dir: Path = Field(
        default_factory=shipped.vendor_dir,
        description="The node_modules directory holding the npm-installed Plotly.js partial bundle "
        "(plotly.js-basic-dist-min); default: the installed package's copy, or vendor/node_modules of the "
        "checkout. Without it the pages get the plotly package's full bundle.",
    )
    page_bundles: bool = Field(
        default=True,
        description="Serve each page's modules as the one file esbuild built at install (frontend/dist, "
        "vendor/build.mjs) while it is up to date with frontend/js; off, or without a build: the plain modules.",
    )
    stall_after_s: float = Field(
        default=600, gt=0,
        description="A running run silent (no event, no heartbeat) for longer than this reads as 'stalled' and "
        "opens a stall alert: one threshold for both. A run's alerts.stall.after_s overrides it for that run.",
    )

    # --- artifacts (checkpoints, code revisions, manifests): docs/artifacts.md ---
    storage_root: Path | None = Field(
        default=None,
        description="Checkpoints are served only from files under this directory; default: data_dir/storage.",
    )
    storage_trainer_root: str | None = Field(
        default=None,
        description="The storage root as trainers see it, when the shared filesystem is mounted "
        "elsewhere on them: absolute checkpoint paths under it are mapped onto storage_root.",
    )
    storage_url: str | None = Field(
        default=None,
        description="s3://bucket/prefix: serve checkpoints from an S3-compatible store instead of storage_root "
        "(needs boto3: the `s3` extra; credentials from the standard AWS_* variables).",
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="Endpoint of a non-AWS S3-compatible store (MinIO, Ceph...), e.g. http://minio:9000."
    )
    s3_region: str | None = Field(default=None, description="Region of the bucket; default: boto3's (AWS_DEFAULT_REGION).")
    s3_addressing_style: Literal["auto", "path", "virtual"] = Field(
        default="auto", description="Bucket addressing: 'path' for most self-hosted stores."
    )
    code_link_template: str = Field(
        default="{remote}/commit/{sha}",
        description="Link to a code revision on its host; fields {remote} (https form), {sha}, "
        "{short_sha}, {branch}, {host}, {path}. Empty: no links.",
    )
    download_accel_prefix: str | None = Field(
        default=None, pattern=r"^/[A-Za-z0-9_./-]*/$",
        description="Set only when every request comes through nginx (deploy/nginx): downloads of local files "
        "are answered, after the visibility check, with 'X-Accel-Redirect: <prefix><key>' for nginx's internal "
        "location of that prefix to send (e.g. /_runcast_files/). Unset: the API streams the file.",
    )
    download_presign_s: int = Field(
        default=0, ge=0, le=604800,
        description="With S3 storage: answer a checkpoint file download, after the visibility check, with a 307 "
        "redirect to a presigned GET of the object valid this many seconds, so the bucket sends the bytes. "
        "0: the API streams the object. Directory archives and HEAD stay on the API.",
    )
    download_chunk_bytes: int = Field(
        default=4 * 1024 * 1024, ge=4096, description="Read (and send) size of checkpoint downloads; two per transfer are in memory."
    )

    upload_chunk_bytes: int = Field(
        default=8 * 1024 * 1024, ge=64 * 1024, le=256 * 1024 * 1024,
        description="Size of the chunks trainers upload checkpoints in (the body limit of a chunk request).",
    )
    upload_max_bytes: int = Field(
        default=1024**4, ge=1, description="Largest checkpoint (a file, or a directory's files together) a trainer may upload."
    )
    upload_max_files: int = Field(default=10_000, ge=1, description="Most files in one uploaded directory checkpoint.")
    # --- images of runs (docs/samples.md) ---
    max_blob_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, le=1024**3,
        description="Largest image a trainer may upload (PUT /api/v1/runs/{id}/blobs/{sha256}); 413 above.",
    )
    max_image_pixels: int = Field(
        default=40_000_000, ge=1, le=89_478_485,  # at most Pillow's own limit, which would warn above it
        description="Most pixels (width × height) an uploaded image may have; decoded only within it.",
    )

    @property
    def checkpoint_root(self) -> Path:
        """The directory checkpoint downloads are confined to."""
        return self.storage_root if self.storage_root is not None else self.data_dir / "storage"
    # --- alerts (docs/alerts.md) ---
    webhook_allow_cidrs: str = Field(
        default="",
        description="Comma-separated CIDRs webhooks may reach although private/loopback (e.g. 10.0.0.0/8).",
    )
    webhook_timeout_s: float = Field(default=10.0, description="Timeout of one webhook request.")
    webhook_max_attempts: int = Field(default=6, description="Attempts per delivery (exponential backoff).")
    webhook_retry_base_s: float = Field(default=2.0, description="First retry delay; doubles per attempt.")
    webhook_disable_after: int = Field(
        default=10, description="Consecutive failed attempts after which a subscription is disabled."
    )
    smtp_host: str | None = Field(default=None, description="SMTP server for email alerts; unset = no email.")
    smtp_port: int = 25
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_starttls: bool = False
    smtp_from: str = "runcast@localhost"
    subscribe_rate_limit: int = Field(default=10, description="Subscriptions one client IP may create per window.")
    subscribe_rate_window_s: int = Field(default=3600, description="The rate limit's fixed window.")
    alert_check_interval_s: float = Field(
        default=30.0, description="How often the stall / restart-loop check runs (beat or embedded timer)."
    )
    delivery_retention_s: float = Field(
        default=30 * 24 * 3600, gt=0,
        description="Finished notification deliveries (sent, failed, dropped) are deleted after this.",
    )
    delivery_prune_interval_s: float = Field(
        default=3600, gt=0, description="How often old deliveries are pruned (beat or embedded timer)."
    )

    # --- dashboard sign-in (docs/auth.md) ---
    session_ttl_s: float = Field(
        default=12 * 3600, gt=0, le=30 * 24 * 3600,
        description="A dashboard session ends this long after sign-in (fixed: use does not extend it).",
    )
    signin_rate_limit: int = Field(default=20, ge=1, description="Sign-in attempts one client IP may make per window.")
    signin_rate_window_s: int = Field(default=300, ge=1, description="The sign-in rate limit's fixed window.")
    oidc_providers: list[OidcProvider] = Field(
        default=[], description="OpenID Connect providers as a JSON list of {name, display_name, issuer, client_id, "
        "client_secret, scope?}; empty: only local accounts and tokens sign in (docs/auth.md).",
    )
    oidc_state_secret: SecretStr | None = Field(
        default=None, description="Signs the short-lived cookie that carries an OpenID Connect sign-in's state, nonce "
        "and PKCE verifier to the callback. Unset: a random one per process (set it when several API processes "
        "serve one site).",
    )

    # --- the operator's view (docs/operations.md) ---
    log_format: Literal["text", "json"] = Field(
        default="text", description="'json': the API and workers log one JSON object per line, with run_id where known.",
    )
    metrics_token: str | None = Field(
        default=None,
        description="When set, GET /metrics answers only 'Authorization: Bearer <token>'; unset: open "
        "(it holds aggregate counts only, no run id or project name).",
    )
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias="PROMETHEUS_MULTIPROC_DIR",
        description="prometheus-client's multiprocess directory (PROMETHEUS_MULTIPROC_DIR, not RUNCAST_-prefixed): "
        "set it, to an empty directory shared by the host's API processes and workers, whenever more than one "
        "process runs; /metrics then sums them all.",
    )

    @field_validator("prometheus_multiproc_dir")
    @classmethod
    def _check_multiproc_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"PROMETHEUS_MULTIPROC_DIR={value} is not a directory")
        return value

    # --- sharing: embeds, badges, plots, CORS (docs/sharing.md) ---
    embed_frame_ancestors: str = Field(
        default="*",
        description="Who may frame the /embed pages: the Content-Security-Policy frame-ancestors sources, "
        "space-separated ('self', https://blog.example.org, https://*.example.org, *), or 'none'. "
        "Only /embed pages are affected.",
    )
    cors_allow_origins: str = Field(
        default="*",
        description="Origins whose scripts may read the public read API (GET/HEAD of /api/v1/runs..., "
        "/api/v1/projects/..., /badge/...): comma-separated (https://blog.example.org), '*' for any, "
        "empty for none. Never granted to writes, and never with cookies.",
    )

    @field_validator("embed_frame_ancestors")
    @classmethod
    def _check_frame_ancestors(cls, value: str) -> str:
        sources = value.split()
        if not sources or any(not _CSP_SOURCE.fullmatch(s) for s in sources):
            raise ValueError(
                f"RUNCAST_EMBED_FRAME_ANCESTORS={value!r}: give space-separated CSP sources "
                "('self', 'none', *, https://example.org)"
            )
        return " ".join(sources)

    @field_validator("cors_allow_origins")
    @classmethod
    def _check_cors_origins(cls, value: str) -> str:
        for origin in (o.strip().rstrip("/") for o in value.split(",") if o.strip()):
            if origin != "*" and not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"RUNCAST_CORS_ALLOW_ORIGINS: {origin!r} is not an origin (scheme://host[:port]) or '*'"
                )
        return value

    @property
    def cors_origins(self) -> list[str]:
        """The allowed origins, as a list ('*' alone for any)."""
        return [o.strip().rstrip("/") for o in self.cors_allow_origins.split(",") if o.strip()]

    @property
    def embedded(self) -> bool:
        """True when no Redis is configured: eager tasks and the in-process hub."""
        return not self.redis_url

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'runcast.db'}"
