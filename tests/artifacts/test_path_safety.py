"""The storage serves only files under its root: each class of artifact-path attack is refused.

The classes behind MLflow's artifact-path CVEs: '..' traversal, absolute paths,
URL-encoded and double-encoded traversal, symlinks that point outside, NUL bytes.
Each is tried at the storage layer and end to end (recorded by a trainer, then
listed and downloaded), with a real secret file outside the root.
"""

from __future__ import annotations

import os

import pytest
from runcast_server.artifacts.storage import LocalStorage, NotStored, UnsafePath, safe_relative

from artifacts.conftest import checkpoint_event, write_file


@pytest.fixture
def layout(tmp_path):
    root = tmp_path / "root"
    (root / "run1").mkdir(parents=True)
    (root / "run1" / "ok.pt").write_bytes(b"weights")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"top secret")
    return root, secret


ATTACKS = {
    "dotdot": "../secret.txt",
    "dotdot_nested": "run1/../../secret.txt",
    "dotdot_backslash": "run1\\..\\..\\secret.txt",
    "absolute_outside": "/etc/passwd",
    "url_encoded": "%2e%2e/secret.txt",
    "url_encoded_slash": "..%2fsecret.txt",
    "double_encoded": "%252e%252e%252fsecret.txt",
    "mixed_case_encoded": "%2E%2e%2Fsecret.txt",
    "nul_byte": "run1/ok.pt\x00.txt",
    "drive_letter": "C:\\secret.txt",
    "root_itself": ".",
    "empty": "",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_storage_refuses(layout, name):
    root, _ = layout
    with pytest.raises(UnsafePath):
        LocalStorage(root).locate(ATTACKS[name])


def test_absolute_path_with_dotdot_into_root_prefix_sibling(layout, tmp_path):
    root, _ = layout
    sibling = tmp_path / "root-evil"  # shares the root's name as a string prefix
    sibling.mkdir()
    (sibling / "x.pt").write_bytes(b"x")
    with pytest.raises(UnsafePath):
        LocalStorage(root).locate(str(sibling / "x.pt"))


def test_symlink_pointing_outside_is_refused(layout):
    root, secret = layout
    os.symlink(secret, root / "run1" / "link.pt")
    os.symlink(secret.parent, root / "dirlink")
    storage = LocalStorage(root)
    with pytest.raises(UnsafePath):
        storage.locate("run1/link.pt")
    with pytest.raises(UnsafePath):
        storage.locate("dirlink/secret.txt")


def test_symlink_inside_root_is_followed(layout):
    root, _ = layout
    os.symlink(root / "run1" / "ok.pt", root / "latest.pt")
    obj = LocalStorage(root).locate("latest.pt")
    assert (obj.key, obj.size) == ("latest.pt", 7)


def test_symlinked_root_is_allowed(layout, tmp_path):
    root, _ = layout
    alias = tmp_path / "alias"
    os.symlink(root, alias)
    assert LocalStorage(alias).locate(str(alias / "run1" / "ok.pt")).size == 7
    assert LocalStorage(alias).locate("run1/ok.pt").size == 7


def test_safe_paths_accepted(layout):
    root, _ = layout
    storage = LocalStorage(root)
    assert storage.locate("run1/ok.pt").key == "run1/ok.pt"
    assert storage.locate("./run1//ok.pt").key == "run1/ok.pt"
    assert storage.locate(str(root / "run1" / "ok.pt")).key == "run1/ok.pt"
    assert safe_relative("/mnt/t/run1/ok.pt", str(root), "/mnt/t") == "run1/ok.pt"
    with pytest.raises(NotStored):
        storage.locate("run1/absent.pt")


def test_file_swapped_for_symlink_after_locate_is_refused(layout):
    root, secret = layout
    storage = LocalStorage(root)
    obj = storage.locate("run1/ok.pt")
    os.remove(root / "run1" / "ok.pt")
    os.symlink(secret, root / "run1" / "ok.pt")
    with pytest.raises(NotStored):
        storage.open(obj)


def test_fifo_is_not_served(layout):
    root, _ = layout
    os.mkfifo(root / "run1" / "pipe.pt")
    with pytest.raises(NotStored):
        LocalStorage(root).locate("run1/pipe.pt")


def test_end_to_end_every_attack_is_missing_and_not_downloadable(client, seed, storage_root):
    secret = storage_root.parent / "secret.txt"
    secret.write_bytes(b"top secret")
    project_dir = storage_root / "demo"
    project_dir.mkdir()
    os.symlink(secret, project_dir / "link.pt")
    sim = seed.run().start()
    paths = [p for p in ATTACKS.values() if p and "\x00" not in p]
    paths += [str(secret), str(project_dir / "link.pt"), "demo/link.pt"]
    for step, path in enumerate(paths):
        sim.send([checkpoint_event(sim, path, step, 10, None)])
    sha = write_file(project_dir / "good.pt", 10)
    sim.send([checkpoint_event(sim, "demo/good.pt", 1000, 10, sha)])
    listed = client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]
    assert len(listed) == len(paths) + 1
    for c in listed:
        res = client.get(f"/api/v1/runs/{sim.run}/checkpoints/{c['id']}/download")
        if c["step"] == 1000:
            assert res.status_code == 200 and c["status"] == "available"
            continue
        assert c["status"] == "missing" and c["download_url"] is None, c
        assert res.status_code == 404 and b"top secret" not in res.content


def test_nul_byte_path_is_refused_at_the_door(client, seed):
    sim = seed.run().start()
    res = client.post(
        "/api/v1/ingest",
        json={"v": 1, "events": [checkpoint_event(sim, "demo/ok.pt", 1, 0, None) | {"path": ATTACKS["nul_byte"]}]},
        headers={"Authorization": f"Bearer {seed.token()}"},
    )
    assert res.status_code == 422
    assert res.json()["error"] == {"message": "holds a NUL character", "field": "path", "index": 0}


@pytest.mark.parametrize(
    "cid",
    ["..%2f..%2fsecret.txt", "%2e%2e", "%252e%252e%252f", "1%00", "-1", "0", "1.5", "99999999999999999999999"],
)
def test_checkpoint_id_in_url_is_validated(client, seed, cid):
    sim = seed.run().start()
    res = client.get(f"/api/v1/runs/{sim.run}/checkpoints/{cid}/download")
    assert res.status_code in (404, 422), (cid, res.status_code)


def test_run_id_traversal_in_url(client):
    for bad in ("..%2f..%2fetc", "%2e%2e", "a" * 65):
        assert client.get(f"/api/v1/runs/{bad}/checkpoints").status_code in (404, 422)
