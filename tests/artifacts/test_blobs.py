"""Images of runs on the server: ``PUT``/``HEAD /runs/{id}/blobs/{sha256}`` and the image route.

Through the embedded app (TestClient) with real tokens and a local storage root. Every refused
upload is a 4xx naming the field and leaves nothing behind: no file, no row.
"""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from PIL import Image
from runcast_server.outputs.models import Blob, Media
from runcast_server.record.models import Segment
from sqlalchemy import func, select

from artifacts.blob_images import HTML, SVG, gif, jpeg, png, png_bomb, sha

YEAR = "max-age=31536000, immutable"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def put(client: Any, token: str | None, run: str, data: Any, content_type: str = "image/png",
        digest: str | None = None) -> Any:
    headers = {"Content-Type": content_type, **(_auth(token) if token else {})}
    return client.put(f"/api/v1/runs/{run}/blobs/{digest or sha(data)}", content=data, headers=headers)


def blob_files(storage_root) -> list[str]:
    folder = storage_root / "demo" / "blobs"
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def blob_rows(db: Any) -> int:
    with db.scope() as session:
        return session.scalar(select(func.count()).select_from(Blob))


def add_media(db: Any, run: str, blob: str | None, *, kind: str = "image", step: int = 1, version: int | None = None) -> int:
    """A media row as the ingest stores one (the other half of issue 25): its id."""
    with db.scope() as session:
        segment = session.scalar(select(Segment.id).where(Segment.run_id == run))
        seq = session.scalar(select(func.count()).select_from(Media).where(Media.run_id == run))
        row = Media(run_id=run, segment_id=segment, seq=1000 + seq, step=step, key="gen/grid", kind=kind, blob=blob,
                    payload={}, ts=time.time(), received_at=time.time(), version=version)
        session.add(row)
        session.flush()
        return row.id


@pytest.fixture
def sim(seed):
    return seed.run("demo").start()


def test_an_image_is_stored_once_and_head_says_so(db: Any, client, seed, sim, storage_root):
    token = seed.token("demo")
    data = png(40, 20)
    assert client.head(f"/api/v1/runs/{sim.run}/blobs/{sha(data)}", headers=_auth(token)).status_code == 404
    first = put(client, token, sim.run, data)
    assert first.status_code == 201, first.text
    assert first.json() == {"sha256": sha(data), "size": len(data), "content_type": "image/png", "width": 40,
                            "height": 20}
    assert client.head(f"/api/v1/runs/{sim.run}/blobs/{sha(data)}", headers=_auth(token)).status_code == 200
    again = put(client, token, sim.run, data)
    assert again.status_code == 200 and again.json() == first.json()
    stored = storage_root / "demo" / "blobs" / sha(data)[:2] / sha(data)
    assert stored.read_bytes() == data
    assert blob_files(storage_root) == [sha(data)] and blob_rows(db) == 1  # no temporary file left


def test_jpeg_stays_jpeg_and_the_type_is_the_one_found(db: Any, client, seed, sim):
    data = jpeg(33, 17)
    res = put(client, seed.token("demo"), sim.run, data, "image/jpeg; charset=binary")
    assert res.status_code == 201, res.text
    assert res.json()["content_type"] == "image/jpeg" and (res.json()["width"], res.json()["height"]) == (33, 17)


def _truncated() -> bytes:
    whole = png(300, 300, (1, 2, 3))
    return whole[: len(whole) // 2]


@pytest.mark.parametrize(("body", "content_type", "status", "field"), [
    (png(), "image/jpeg", 422, "Content-Type"),  # a lie: PNG bytes declared JPEG
    (jpeg(), "image/png", 422, "Content-Type"),
    (SVG, "image/svg+xml", 415, "Content-Type"),
    (SVG, "image/png", 415, "Content-Type"),  # a script posing as an image
    (HTML, "image/png", 415, "Content-Type"),
    (HTML, "text/html", 415, "Content-Type"),
    (gif(), "image/png", 415, "Content-Type"),
    (gif(), "image/gif", 415, "Content-Type"),
    (png(), "application/octet-stream", 415, "Content-Type"),
    (png_bomb(), "image/png", 422, "body"),  # 30000×30000 pixels in ~110 KB
    (_truncated(), "image/png", 422, "body"),
    (b"", "image/png", 422, "body"),
])
def test_what_is_not_a_whole_image_of_its_declared_type_is_refused(db: Any, client, seed, sim, storage_root, body,
                                                                   content_type, status, field):
    res = put(client, seed.token("demo"), sim.run, body, content_type)
    assert res.status_code == status, res.text
    assert res.json()["error"]["field"] == field
    assert blob_files(storage_root) == [] and blob_rows(db) == 0


def test_a_bomb_names_its_pixels(client, seed, sim):
    res = put(client, seed.token("demo"), sim.run, png_bomb())
    assert "900000000 pixels" in res.json()["error"]["message"]


def test_a_sha256_that_is_not_the_bodys_is_refused(db: Any, client, seed, sim, storage_root):
    res = put(client, seed.token("demo"), sim.run, png(), digest=sha(b"something else"))
    assert res.status_code == 422 and res.json()["error"]["field"] == "sha256"
    bad = client.put(f"/api/v1/runs/{sim.run}/blobs/{sha(png()).upper()}", content=png(),
                     headers={"Content-Type": "image/png", **_auth(seed.token("demo"))})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "sha256"
    assert blob_files(storage_root) == [] and blob_rows(db) == 0


def test_a_blob_over_the_limit_is_refused_before_it_is_read(db: Any, client, seed, sim, storage_root):
    big = png(10, 10) + b"\0" * (16 * 1024 * 1024)
    res = put(client, seed.token("demo"), sim.run, big)
    assert res.status_code == 413 and res.json()["error"]["field"] == "body"

    def chunks():  # no Content-Length: counted as it is read
        yield png(10, 10)
        for _ in range(17):
            yield b"\0" * (1024 * 1024)

    res = put(client, seed.token("demo"), sim.run, chunks(), digest=sha(big))
    assert res.status_code == 413 and res.json()["error"]["field"] == "body"
    assert blob_files(storage_root) == [] and blob_rows(db) == 0


def test_tokens_and_runs_wall_the_blobs(db: Any, client, seed, sim, storage_root):
    data = png()
    other = seed.token("other")
    res = put(client, other, sim.run, data)  # another project's token: as an unknown run
    assert res.status_code == 404 and res.json()["error"]["field"] == "run"
    assert put(client, seed.token("demo"), "nosuchrun0000", data).json() == res.json()
    assert put(client, None, sim.run, data).status_code == 401
    assert put(client, "rc_not_a_token", sim.run, data).status_code == 401
    head = f"/api/v1/runs/{sim.run}/blobs/{sha(data)}"
    assert client.head(head).status_code == 401
    assert client.head(head, headers=_auth(other)).status_code == 404
    assert blob_files(storage_root) == [] and blob_rows(db) == 0
    assert put(client, seed.token("demo"), sim.run, data).status_code == 201
    assert client.head(head, headers=_auth(other)).status_code == 404  # held by demo, not visible to other


def test_a_blob_whose_file_went_missing_is_not_held_and_is_written_again(client, seed, sim, storage_root):
    token, data = seed.token("demo"), png()
    put(client, token, sim.run, data)
    (storage_root / "demo" / "blobs" / sha(data)[:2] / sha(data)).unlink()
    assert client.head(f"/api/v1/runs/{sim.run}/blobs/{sha(data)}", headers=_auth(token)).status_code == 404
    assert put(client, token, sim.run, data).status_code == 200
    assert (storage_root / "demo" / "blobs" / sha(data)[:2] / sha(data)).read_bytes() == data


# --- the image route -------------------------------------------------------------------------


def _image(client: Any, run: str, mid: int, token: str | None = None, **params: Any) -> Any:
    return client.get(f"/api/v1/runs/{run}/media/{mid}/image", params=params, headers=_auth(token) if token else {})


def test_the_image_is_served_as_found_never_sniffed_never_run(db: Any, client, seed, sim):
    data = png(200, 100)
    put(client, seed.token("demo"), sim.run, data)
    mid = add_media(db, sim.run, sha(data))
    res = _image(client, sim.run, mid)
    assert res.status_code == 200 and res.content == data
    assert res.headers["content-type"] == "image/png"
    assert res.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in res.headers["content-security-policy"]
    assert res.headers["etag"] == f'"{sha(data)}"'
    assert res.headers["cache-control"] == f"public, {YEAR}"
    again = client.get(f"/api/v1/runs/{sim.run}/media/{mid}/image", headers={"If-None-Match": res.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    team = _image(client, sim.run, mid, seed.token("demo"))  # the team sees what anyone sees: still public
    assert team.status_code == 200 and team.headers["cache-control"] == f"public, {YEAR}"


def test_thumbnails_keep_the_aspect_are_cached_and_never_enlarge(db: Any, client, seed, sim, storage_root):
    data = jpeg(200, 100)
    put(client, seed.token("demo"), sim.run, data, "image/jpeg")
    mid = add_media(db, sim.run, sha(data))
    res = _image(client, sim.run, mid, w=64)
    assert res.status_code == 200, res.text
    assert res.headers["content-type"] in ("image/webp", "image/png")
    assert res.headers["etag"] == f'"{sha(data)}-w64"' and res.headers["cache-control"] == f"public, {YEAR}"
    assert Image.open(io.BytesIO(res.content)).size == (64, 32)
    ext = res.headers["content-type"].split("/")[1]
    kept = storage_root / "demo" / "blobs" / "thumbs" / f"{sha(data)}-64.{ext}"
    assert kept.read_bytes() == res.content
    kept.write_bytes(b"kept")  # the second request reads what was kept, never resizes again
    assert _image(client, sim.run, mid, w=64).content == b"kept"
    same = _image(client, sim.run, mid, w=2048)  # wider than the image: the image itself
    assert same.content == data and same.headers["content-type"] == "image/jpeg"
    for bad in (8, 15, 2049, "x"):
        res = _image(client, sim.run, mid, w=bad)
        assert res.status_code == 422 and res.json()["error"]["field"] == "w"


def test_transparency_survives_a_thumbnail(db: Any, client, seed, sim):
    data = png(100, 50, (10, 20, 30, 0), mode="RGBA")
    put(client, seed.token("demo"), sim.run, data)
    res = _image(client, sim.run, add_media(db, sim.run, sha(data)), w=20)
    assert Image.open(io.BytesIO(res.content)).convert("RGBA").getpixel((5, 5))[3] == 0


def test_a_private_runs_images_are_unknown_to_strangers(db: Any, client, seed):
    sim = seed.run("demo").start(visibility="private")
    data = png()
    put(client, seed.token("demo"), sim.run, data)
    mid = add_media(db, sim.run, sha(data))
    for token in (None, seed.token("other")):
        res = _image(client, sim.run, mid, token)
        assert res.status_code == 404 and res.json()["error"]["field"] == "run"
    team = _image(client, sim.run, mid, seed.token("demo"))
    assert team.status_code == 200 and team.headers["cache-control"] == f"private, {YEAR}"


def test_only_a_runs_own_stored_images_are_served(db: Any, client, seed, sim):
    data = png()
    other = seed.run("demo").start()
    put(client, seed.token("demo"), sim.run, data)
    mine = add_media(db, sim.run, sha(data))
    table = add_media(db, sim.run, None, kind="table")
    unstored = add_media(db, sim.run, sha(b"never uploaded"))
    for run, mid in ((other.run, mine), (sim.run, table), (sim.run, unstored), (sim.run, 10**9)):
        res = _image(client, run, mid)
        assert res.status_code == 404 and res.json()["error"]["field"] == "media_id", (run, mid)
    res = _image(client, sim.run, 0)
    assert res.status_code == 422


def test_the_policy_hook_hides_media_and_holds_them_back_under_a_delay():
    from runcast_server.outputs.access import output_visible
    from runcast_server.policy.apply import TEAM, View
    from runcast_server.policy.delay import Horizon

    row = Media(version=7, received_at=100.0)
    assert output_visible(TEAM, row) and output_visible(View(team=False), row)
    hidden = View(team=False, policy={"media": "hidden"})
    assert not output_visible(hidden, row)
    due = Horizon(version=7, until=90.0, delay_s=60, status="running", last_step=None)
    assert output_visible(View(team=False, horizon=due), row)
    early = Horizon(version=6, until=90.0, delay_s=60, status="running", last_step=None)
    assert not output_visible(View(team=False, horizon=early), row)
    assert not output_visible(View(team=False, horizon=due), Media(version=None, received_at=100.0))
    assert output_visible(View(team=False, horizon=due), Media(version=None, received_at=80.0))


def test_two_uploads_of_the_same_bytes_at_once_leave_one_row(db: Any, client, seed, sim, storage_root, monkeypatch):
    from runcast_server.artifacts.blob_store import LocalBlobStore
    from runcast_server.artifacts.blobs import store_blob
    from runcast_server.core.models import Project

    data = png()
    store = LocalBlobStore(storage_root)
    with db.scope() as session:
        project = session.scalar(select(Project).where(Project.name == "demo"))
        assert store_blob(session, store, project, sha(data), data, "image/png", 10**6)[1] is True
    with db.scope() as session:  # the other request looked before the first one's row was committed
        project = session.scalar(select(Project).where(Project.name == "demo"))
        real_get = session.get
        looked = []

        def first_look_misses(kind: Any, key: Any, **kwargs: Any) -> Any:
            looked.append(kind)
            return None if kind is Blob and len(looked) == 1 else real_get(kind, key, **kwargs)

        monkeypatch.setattr(session, "get", first_look_misses)
        row, created = store_blob(session, store, project, sha(data), data, "image/png", 10**6)
        assert created is False and row.sha256 == sha(data)
    assert blob_rows(db) == 1 and blob_files(storage_root) == [sha(data)]
