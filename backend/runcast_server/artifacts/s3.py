"""Checkpoints in an S3-compatible object store (AWS S3, MinIO, Ceph RGW, moto...).

Selected with ``RUNCAST_STORAGE_URL=s3://bucket/prefix`` (docs/artifacts.md). Needs
boto3 (``pip install 'runcast[s3]'``); credentials come from boto3's usual chain
(``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, a profile,
an instance role).

Key derivation (``S3Storage.key_for``) uses ``safe_relative``, so the rules are those of
the local backend, with the prefix in the place of the root:

* a relative recorded path is relative to the prefix: ``run1/step100.pt`` is the object
  ``<prefix>/run1/step100.pt``;
* ``s3://<bucket>/<prefix>/...`` must name the configured bucket and lie under the prefix;
* an absolute filesystem path is accepted only under ``trainer_root`` (a directory the
  trainers write to that is synchronised to the prefix) and is mapped onto the prefix;
* NUL bytes, percent-escapes (never decoded), ``..`` components, drive letters, and
  anything outside the prefix are refused before any request is made: no key outside
  the prefix is ever sent to the store. (There are no symbolic links in a bucket.)

``locate`` is one HEAD (size, Last-Modified, the store's ETag); when there is no object
but keys exist under ``key/`` the checkpoint is a directory (listed, not downloadable),
as DeepSpeed writes them. ``open`` gives a reader that streams one ranged GET per
download, with ``If-Match`` on the ETag seen by ``locate``, so an object replaced
between the listing and the download ends the transfer instead of mixing two files.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from runcast_server.artifacts.storage import (
    NotStored,
    StoredObject,
    UnsafePath,
    check_within,
    safe_relative,
)

MAX_KEY_BYTES = 1024  # S3's limit on object keys
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-_]{1,254}$")


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # no leading or trailing '/'; may be empty


def parse_storage_url(url: str) -> S3Location:
    """``s3://bucket[/prefix]`` -> S3Location; ValueError if it is not one."""
    if not url.startswith("s3://"):
        raise ValueError("RUNCAST_STORAGE_URL must look like s3://bucket/prefix")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket):
        raise ValueError(f"RUNCAST_STORAGE_URL: {bucket!r} is not a bucket name")
    prefix = prefix.strip("/")
    if prefix:
        try:
            prefix = safe_relative(prefix, "")
        except UnsafePath as exc:
            raise ValueError(f"RUNCAST_STORAGE_URL: the prefix is refused ({exc})") from None
    return S3Location(bucket, prefix)


class S3Reader:
    """Positional reads of one object, streamed: one GET ``bytes=start-end`` per span.

    ``span(start, end)`` (called by the download response) says which bytes will be read
    in order; ``read_at`` then continues the open response while reads are sequential
    and starts a new ranged GET otherwise. Memory: one chunk at a time.
    """

    def __init__(self, client: Any, bucket: str, obj: StoredObject) -> None:
        self._client = client
        self._bucket = bucket
        self._obj = obj
        self._body: Any = None
        self._pos = -1
        self._end = obj.size  # exclusive end of the current span
        self._lock = threading.Lock()

    def span(self, start: int, end: int) -> None:
        self._end = max(start, min(end, self._obj.size))

    def _get(self, offset: int) -> None:
        self._drop()
        end = self._end if self._end > offset else self._obj.size
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": self._obj.key, "Range": f"bytes={offset}-{end - 1}"}
        if self._obj.version:
            params["IfMatch"] = self._obj.version
        try:
            response = self._client.get_object(**params)
        except Exception as exc:  # botocore's ClientError / connection errors
            raise OSError(f"cannot read s3://{self._bucket}/{self._obj.key}: {exc}") from exc
        self._body = response["Body"]
        self._pos = offset

    def read_at(self, offset: int, size: int) -> bytes:
        if offset >= self._obj.size or size <= 0:
            return b""
        with self._lock:
            if self._body is None or offset != self._pos:
                self._get(offset)
            parts: list[bytes] = []
            want = size
            while want > 0:
                data = self._body.read(want)
                if not data:
                    break
                parts.append(data)
                want -= len(data)
            chunk = b"".join(parts)
            self._pos += len(chunk)
            if not chunk or self._pos >= self._end:
                self._drop()
            return chunk

    def _drop(self) -> None:
        if self._body is not None:
            with contextlib.suppress(Exception):  # closing a half-read stream is best effort
                self._body.close()
        self._body = None
        self._pos = -1

    def close(self) -> None:
        with self._lock:
            self._drop()


class S3Storage:
    """Objects under ``s3://bucket/prefix``; ``client`` is a boto3 S3 client (thread-safe)."""

    def __init__(self, location: S3Location, client: Any, trainer_root: str | None = None) -> None:
        self.bucket = location.bucket
        self.prefix = location.prefix
        self.client = client
        self.trainer_root = os.path.abspath(trainer_root) if trainer_root else None

    def key_for(self, recorded_path: str) -> str:
        """The object key of a recorded path; UnsafePath if any rule refuses it."""
        if not isinstance(recorded_path, str):
            raise UnsafePath("empty path")
        if recorded_path.startswith("s3://"):
            bucket, slash, rest = recorded_path[len("s3://") :].partition("/")
            if bucket != self.bucket or not slash:
                raise UnsafePath("s3 URL outside the storage bucket")
            base = "/" + self.prefix if self.prefix else "/"
            rel = safe_relative("/" + rest, base) if rest else ""
            if not rel or rel == ".":
                raise UnsafePath("path names the storage root itself")
        else:
            rel = safe_relative(recorded_path, "", self.trainer_root)
        key = f"{self.prefix}/{rel}" if self.prefix else rel
        if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
            raise UnsafePath("object key longer than 1024 bytes")
        if self.prefix and not key.startswith(self.prefix + "/"):  # belt and braces
            raise UnsafePath("key outside the storage prefix")
        return key

    def locate(self, recorded_path: str, within: str | None = None) -> StoredObject:
        key = self.key_for(recorded_path)
        rel = key[len(self.prefix) + 1 :] if self.prefix else key
        check_within(rel, within)  # before any request: no key of another project is ever asked for
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code not in ("404", "NoSuchKey", "NotFound"):
                raise NotStored(f"cannot read the object ({code or exc})") from None
        except Exception as exc:  # noqa: BLE001 - an unreachable store is "not servable", not a 500
            raise NotStored(f"cannot reach the object store ({type(exc).__name__})") from None
        else:
            modified = head.get("LastModified")
            return StoredObject(
                key=rel,
                size=int(head.get("ContentLength", 0)),
                mtime=modified.timestamp() if modified is not None else 0.0,
                version=head.get("ETag"),
            )
        try:
            listing = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key + "/", MaxKeys=1)
        except Exception:  # noqa: BLE001
            listing = {}
        if listing.get("KeyCount", 0) or listing.get("Contents"):
            return StoredObject(key=rel, size=0, mtime=0.0, is_dir=True)
        raise NotStored("no such object under the storage prefix")

    def open(self, obj: StoredObject) -> S3Reader:
        if obj.is_dir:
            raise NotStored("not a file")
        key = f"{self.prefix}/{obj.key}" if self.prefix else obj.key
        return S3Reader(self.client, self.bucket, StoredObject(key=key, size=obj.size, mtime=obj.mtime, version=obj.version))

    def presign(self, obj: StoredObject, disposition: str, expires_s: int) -> str | None:
        """A presigned GET of the object (SigV4, computed locally), answered with ``disposition``."""
        if obj.is_dir:
            return None
        key = f"{self.prefix}/{obj.key}" if self.prefix else obj.key
        params = {"Bucket": self.bucket, "Key": key, "ResponseContentDisposition": disposition,
                  "ResponseContentType": "application/octet-stream"}
        url: str = self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_s)
        return url

    def files(self, obj: StoredObject) -> list[tuple[str, int]]:
        """``(relative path, size)`` of every object under a directory checkpoint's key, sorted."""
        if not obj.is_dir:
            return []
        base = (f"{self.prefix}/{obj.key}" if self.prefix else obj.key) + "/"
        out: list[tuple[str, int]] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            for item in page.get("Contents", []):
                rel = item["Key"][len(base):]
                if rel and not rel.endswith("/"):
                    out.append((rel, int(item["Size"])))
        return sorted(out)


def make_client(endpoint_url: str | None, region: str | None, addressing_style: str | None) -> Any:
    """A boto3 S3 client; credentials from the standard AWS environment / config chain."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeError("RUNCAST_STORAGE_URL is s3://...: install boto3 (pip install 'runcast[s3]')") from exc
    config = Config(
        s3={"addressing_style": addressing_style or "auto"},
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=32,
        signature_version="s3v4",  # presigned download URLs (download_presign_s) are SigV4 everywhere
    )
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint_url or None, region_name=region or None, config=config)
