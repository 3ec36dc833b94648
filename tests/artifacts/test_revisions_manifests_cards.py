"""Code revisions, manifests (one version, diff, scrubbing), the data-mix timeline and reproducibility cards."""

from __future__ import annotations

import pytest
from runcast_server.artifacts.revisions import Revision, code_link, normalise_remote
from runcast_server.artifacts.schemas import CheckpointCard

from artifacts.conftest import checkpoint_event, write_file

DIFF = (
    "diff --git a/train.py b/train.py\n"
    "--- a/train.py\n+++ b/train.py\n"
    "@@ -1 +1,2 @@\n"
    "-lr = 3e-4\n+lr = 1e-4\n"
    '+WANDB_API_KEY = "abcd1234efgh5678ijkl"\n'
    "+# sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 from 10.0.0.1\n"
)


def code(sha, dirty=False, diff="", branch="main"):
    return {"sha": sha, "branch": branch, "remote": "git@github.com:acme/gpt.git", "dirty": dirty, "diff": diff,
            "diff_truncated": False}


@pytest.mark.parametrize(
    "remote, expected",
    [
        ("git@github.com:acme/gpt.git", "https://github.com/acme/gpt"),
        ("ssh://git@gitlab.example.org:2222/team/proj.git", "https://gitlab.example.org/team/proj"),
        ("https://github.com/acme/gpt.git", "https://github.com/acme/gpt"),
        ("https://github.com/acme/gpt/", "https://github.com/acme/gpt"),
        ("/home/me/src/gpt", None),
        ("file:///srv/git/gpt.git", None),
        (None, None),
    ],
)
def test_normalise_remote(remote, expected):
    got = normalise_remote(remote)
    assert (got[0] if got else None) == expected


def test_code_link_template():
    rev = Revision(id=1, sha="a" * 40, branch="dev", remote="git@host.org:o/r.git", dirty=False, diff="",
                   diff_truncated=False)
    assert code_link("{remote}/commit/{sha}", rev) == f"https://host.org/o/r/commit/{'a' * 40}"
    assert code_link("https://{host}/{path}/-/tree/{branch}?s={short_sha}", rev) == (
        f"https://host.org/o/r/-/tree/dev?s={'a' * 12}"
    )
    assert code_link("", rev) is None
    assert code_link("{remote}/{nope}", rev) is None


def test_revisions_per_segment_and_changes(client, seed):
    sim = seed.run().start(code=code("1" * 40))
    sim.resume(100, code=code("1" * 40))  # same code: same revision
    sim.resume(200, code=code("2" * 40, dirty=True, diff=DIFF))  # code changed
    sim.resume(150, code=code("1" * 40))  # back to the first
    body = client.get(f"/api/v1/runs/{sim.run}/revisions").json()
    revs = body["revisions"]
    assert [(r["sha"][:1], r["segments"], r["start_steps"], r["dirty"]) for r in revs] == [
        ("1", [0, 1, 3], [0, 100, 150], False),
        ("2", [2], [200], True),
    ]
    assert revs[0]["link"] == f"https://github.com/acme/gpt/commit/{'1' * 40}"
    assert revs[0]["diff_url"] is None
    assert body["changes"] == [
        {"segment": 2, "step": 200, "from": revs[0]["id"], "to": revs[1]["id"]},
        {"segment": 3, "step": 150, "from": revs[1]["id"], "to": revs[0]["id"]},
    ]
    res = client.get(revs[1]["diff_url"])
    assert res.status_code == 200 and res.headers["content-type"] == "text/plain; charset=utf-8"
    assert res.headers["x-content-type-options"] == "nosniff"
    assert res.headers["x-runcast-scrubbed"] == "1"
    assert 'WANDB_API_KEY = "[SECRET]"' in res.text and "abcd1234" not in res.text
    # Hashes and addresses in code are kept: only credentials are scrubbed from diffs.
    assert "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 from 10.0.0.1" in res.text
    assert revs[1]["diff_bytes"] == len(res.content)
    assert client.get(f"/api/v1/runs/{sim.run}/revisions/{revs[0]['id']}/diff").text == ""
    assert client.get(f"/api/v1/runs/{sim.run}/revisions/12345678/diff").status_code == 404


def _manifest_v1():
    return {
        "tokenizer": "bytes",
        "sources": {
            "web": {
                "files_columns": ["name", "size", "sha256", "status"],
                "files": [["a.txt", 100, "a" * 64, "kept"], ["b.txt", 200, "b" * 64, "kept"]],
                "train_tokens": 900,
                "val_tokens": 100,
                "previews": [
                    {"name": "a.txt", "text": "Contact jane.doe@example.com or +1-202-555-0143; card 4111 1111 1111 1111; "
                                             "released 2024-03-05 at step 120000 with torch version 2.3.1.0"}
                ],
            },
            "code": {"files": [{"path": "x.py", "size": 10, "sha256": "c" * 64, "tokens": 50}]},
        },
    }


def _manifest_v2():
    m = _manifest_v1()
    web = m["sources"]["web"]
    web["files"] = [["a.txt", 120, "d" * 64, "kept"], ["c.txt", 50, "e" * 64, "kept"]]
    web["train_tokens"] = 1000
    m["sources"]["books"] = {"tokens": 500, "files": [{"name": "moby.txt", "size": 5, "sha256": "f" * 64}]}
    m["weights"] = {"web": 0.5, "code": 0.2, "books": 0.3}
    return m


def test_manifests_list_version_diff_and_scrubbing(client, seed):
    sim = seed.run().start()
    sim.send([
        sim.event("data_mix", step=0, weights={"web": 0.8, "code": 0.2}),
        sim.event("manifest", step=0, version="v1", manifest=_manifest_v1()),
        sim.event("manifest", step=500, version="v2", manifest=_manifest_v2()),
    ])
    listed = client.get(f"/api/v1/runs/{sim.run}/manifests").json()["manifests"]
    assert [(m["version"], m["step"], m["files"], m["tokens"]) for m in listed] == [("v1", 0, 3, 1050), ("v2", 500, 4, 1650)]

    one = client.get(f"/api/v1/runs/{sim.run}/manifests/v1").json()
    text = one["manifest"]["sources"]["web"]["previews"][0]["text"]
    assert text == ("Contact [EMAIL] or [PHONE]; card [CARD]; released 2024-03-05 at step 120000 "
                    "with torch version 2.3.1.0")
    assert one["scrubbed"] == {"EMAIL": 1, "PHONE": 1, "CARD": 1}
    assert one["manifest"]["sources"]["web"]["files"][0] == ["a.txt", 100, "a" * 64, "kept"]  # digests kept
    assert client.get(f"/api/v1/runs/{sim.run}/manifests/v9").status_code == 404

    d = client.get(f"/api/v1/runs/{sim.run}/manifests/diff", params={"from": "v1", "to": "v2"}).json()
    assert d["files"]["added"] == ["books/moby.txt", "web/c.txt"]
    assert d["files"]["removed"] == ["web/b.txt"]
    assert d["files"]["changed"] == [
        {"file": "web/a.txt", "from": {"size": 100, "sha256": "a" * 64, "tokens": None, "status": "kept"},
         "to": {"size": 120, "sha256": "d" * 64, "tokens": None, "status": "kept"}}
    ]
    assert d["sources"] == {"added": ["books"], "removed": []}
    assert d["tokens"]["web"] == {"from": 1000, "to": 1100, "delta": 100}
    assert d["tokens"]["books"] == {"from": None, "to": 500, "delta": None}
    assert d["total_tokens"] == {"from": 1050, "to": 1650, "delta": 600}
    # v1 has no weights of its own: the data_mix event in force at its step stands in.
    assert d["weights"] == {"books": {"from": None, "to": 0.3}, "web": {"from": 0.8, "to": 0.5}}
    assert client.get(f"/api/v1/runs/{sim.run}/manifests/diff", params={"from": "v1", "to": "nope"}).status_code == 404


def test_version_with_slash_is_reachable(client, seed):
    sim = seed.run().start()
    sim.send([sim.event("manifest", step=None, version="2024/03 mix", manifest={"a": "b"})])
    res = client.get(f"/api/v1/runs/{sim.run}/manifests/2024%2F03%20mix")
    assert res.status_code == 200 and res.json()["manifest"] == {"a": "b"}


def test_data_mix_timeline(client, seed):
    sim = seed.run().start()
    sim.send([sim.event("data_mix", step=0, weights={"web": 3, "code": 1})])
    sim.resume(50)
    sim.send([sim.event("data_mix", step=60, weights={"web": 1, "code": 1, "math": 2})])
    body = client.get(f"/api/v1/runs/{sim.run}/data-mix").json()
    assert body["sources"] == ["code", "math", "web"]
    assert [(c["segment"], c["step"], c["fractions"]) for c in body["changes"]] == [
        (0, 0, {"web": 0.75, "code": 0.25}),
        (1, 60, {"web": 0.25, "code": 0.25, "math": 0.5}),
    ]
    assert body["segments"] == [{"index": 0, "start_step": 0, "resumed": False}, {"index": 1, "start_step": 50, "resumed": True}]


def test_reproducibility_card_follows_lineage(client, seed, storage_root):
    env = {"python": "3.11.9", "torch": "2.3.1", "numpy": "1.26.4", "host": "node-7", "world_size": 8}
    sim = seed.run().start(code=code("1" * 40), config={"lr": 3e-4}, env=env, seed=1234)
    shas = {s: write_file(storage_root / f"ck{s}.pt", 100 + s, s) for s in (100, 200, 300, 250)}
    sim.send([
        sim.event("manifest", step=0, version="v1", manifest={"sources": {}}),
        sim.event("data_mix", step=0, weights={"web": 1.0}),
        sim.event("metrics", step=100, values={"tokens_seen": 409600.0, "loss": 3.0}),
        checkpoint_event(sim, "ck100.pt", 100, 200, shas[100]),
        sim.event("metrics", step=190, values={"tokens_seen": 778240.0}),
        checkpoint_event(sim, "ck200.pt", 200, 300, shas[200]),
        sim.event("data_mix", step=250, weights={"web": 0.5, "code": 0.5}),
        checkpoint_event(sim, "ck300.pt", 300, 400, shas[300]),
    ])
    # A loss spike: resume from step 200 with new code and a new manifest.
    sim.resume(200, code=code("2" * 40, dirty=True, diff=DIFF), config={"lr": 1e-4}, env=env, seed=99)
    sim.send([
        sim.event("manifest", step=200, version="v2", manifest={"sources": {}}),
        checkpoint_event(sim, "ck250.pt", 250, 350, shas[250]),
    ])
    listed = {(c["segment"], c["step"]): c for c in client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]}

    card = client.get(listed[(1, 250)]["card_url"]).json()
    assert card["checkpoint"]["step"] == 250 and card["checkpoint"]["sha256"] == shas[250]
    assert card["segment"]["index"] == 1 and card["segment"]["lineage"] == [
        {"segment": 1, "from_step": 200, "to_step": None},
        {"segment": 0, "from_step": 0, "to_step": 200},
    ]
    assert card["code"]["sha"] == "2" * 40 and card["code"]["dirty"] is True and card["code"]["diff_url"]
    assert (card["config"], card["seed"]) == ({"lr": 1e-4}, 99)
    assert card["packages"] == {"python": "3.11.9", "torch": "2.3.1", "numpy": "1.26.4", "world_size": 8}
    assert card["manifest"]["version"] == "v2"
    assert card["data_mix"]["weights"] == {"web": 1.0}  # the step-250 change was in the abandoned branch
    assert card["data_position"] == {"key": "tokens_seen", "step": 190, "tokens": 778240.0, "exact": False}
    assert card["parent_checkpoint"]["step"] == 200 and card["parent_checkpoint"]["segment"] == 0

    old = client.get(listed[(0, 300)]["card_url"]).json()
    assert old["data_mix"]["weights"] == {"web": 0.5, "code": 0.5}
    assert old["manifest"]["version"] == "v1" and old["code"]["sha"] == "1" * 40
    assert old["parent_checkpoint"]["step"] == 200

    first = client.get(listed[(0, 100)]["card_url"]).json()
    assert first["parent_checkpoint"] is None
    assert first["data_position"] == {"key": "tokens_seen", "step": 100, "tokens": 409600.0, "exact": True}

    download = client.get(listed[(0, 100)]["card_url"], params={"download": "true"})
    assert download.headers["content-disposition"] == f'attachment; filename="{sim.run}-step100-card.json"'
    assert download.json()["checkpoint"]["id"] == listed[(0, 100)]["id"]
    for answer in (card, old, first):  # the card's OpenAPI model describes it exactly
        assert CheckpointCard.model_validate(answer).model_dump(mode="json") == answer
