"""Images of runs in S3 storage: stored under the prefix once per project, thumbnails kept beside them,
a refused upload leaves no object (a real moto S3 server, s3server.py)."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from artifacts.blob_images import HTML, png, sha
from artifacts.s3server import PREFIX, moto_s3, s3  # noqa: F401 - fixtures
from artifacts.test_blobs import add_media, put


def _objects(s3: Any) -> dict[str, bytes]:  # noqa: F811
    listing = s3.client.list_objects_v2(Bucket=s3.bucket, Prefix=f"{PREFIX}/")
    return {o["Key"]: s3.client.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read()
            for o in listing.get("Contents", [])}


def test_images_and_thumbnails_live_in_the_bucket(s3, db: Any, client, seed):  # noqa: F811
    token = seed.token("demo")
    sim = seed.run("demo").start()
    data = png(100, 40)
    assert put(client, token, sim.run, HTML).status_code == 415
    assert _objects(s3) == {}
    assert put(client, token, sim.run, data).status_code == 201
    head = client.head(f"/api/v1/runs/{sim.run}/blobs/{sha(data)}", headers={"Authorization": f"Bearer {token}"})
    assert head.status_code == 200
    key = f"{PREFIX}/demo/blobs/{sha(data)[:2]}/{sha(data)}"
    assert _objects(s3) == {key: data}
    mid = add_media(db, sim.run, sha(data))
    assert client.get(f"/api/v1/runs/{sim.run}/media/{mid}/image").content == data
    thumb = client.get(f"/api/v1/runs/{sim.run}/media/{mid}/image", params={"w": 50})
    assert thumb.status_code == 200 and Image.open(io.BytesIO(thumb.content)).size == (50, 20)
    ext = thumb.headers["content-type"].split("/")[1]
    assert _objects(s3)[f"{PREFIX}/demo/blobs/thumbs/{sha(data)}-50.{ext}"] == thumb.content
