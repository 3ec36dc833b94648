"""Which checkpoint storage a settings object names: S3 (``artifacts.s3``) or the local root
(``artifacts.storage``). Its own module so that neither backend imports the other."""

from __future__ import annotations

from runcast_server.artifacts.s3 import S3Storage, make_client, parse_storage_url
from runcast_server.artifacts.storage import LocalStorage, Storage


def storage_from_settings(settings: object) -> Storage:
    """The configured backend: S3 when ``storage_url`` is ``s3://...``, else the local root.

    Each call builds a new one (S3: a boto3 client with its own connection pool): build it
    once where the process starts (``AppContext.storage``) and pass it on.
    """
    url = getattr(settings, "storage_url", None)
    trainer_root = getattr(settings, "storage_trainer_root", None)
    if url:
        return _s3_storage(
            url,
            getattr(settings, "s3_endpoint_url", None),
            getattr(settings, "s3_region", None),
            getattr(settings, "s3_addressing_style", None),
            trainer_root,
        )
    root = settings.checkpoint_root  # type: ignore[attr-defined]  # any settings object has it (the rest may be absent)
    return LocalStorage(root, trainer_root)


def _s3_storage(
    url: str, endpoint_url: str | None, region: str | None, addressing_style: str | None, trainer_root: str | None
) -> Storage:
    """An S3 backend with its own boto3 client (which keeps a connection pool)."""
    return S3Storage(parse_storage_url(url), make_client(endpoint_url, region, addressing_style), trainer_root)
