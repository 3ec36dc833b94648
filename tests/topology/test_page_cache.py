"""The run page's first reads through the shipped nginx site and its cache: an anonymous load's
API GETs are answered from the cache on the next load, a credentialed one always goes to the API
and is never stored, a 304 answers a held ETag, and a policy change (a withheld key) reaches the
cached reads and a follower within the edge's lifetime."""

from __future__ import annotations

import time
from typing import Any

from stream.broadcast_follower import Follower
from stream.helpers import RunWriter

from topology.test_broadcast_cache import EDGE_LIFETIME, KEYS, READ_LIFETIME, _put, _until_period_start, cached  # noqa: F401 - the fixture

PUBLIC = "public, max-age=1, stale-while-revalidate=1"


def first_load(run: str) -> list[str]:
    """What run.html's head script and run.js read at start (the default view's loss curve)."""
    base = f"/api/v1/runs/{run}"
    return [base, base + "/events?limit=1000", base + "/metrics?key=loss&max_points=1520",
            base + "/alerts?limit=100", base + "/checkpoints", base + "/revisions", base + "/evals", base + "/comments",
            base + "/reports"]


def test_an_anonymous_first_load_comes_from_the_cache_and_a_credentialed_one_never(cached: Any) -> None:
    w = RunWriter(cached["api"], cached["token"]).start()
    for _ in range(5):
        w.batch(3, KEYS)
    proxy = cached["proxy"]
    urls = first_load(w.run)
    _until_period_start()  # nginx keeps a copy for the two-second period it was stored in: all of this fits one
    first = [proxy.get(u) for u in urls]
    assert [r.status_code for r in first] == [200] * len(urls), [(u, r.text) for u, r in zip(urls, first)]
    assert all(r.headers["cache-control"] == PUBLIC for r in first)
    assert all(r.headers["x-cache-status"] in ("MISS", "EXPIRED") for r in first)
    second = [proxy.get(u) for u in urls]
    assert [r.headers["x-cache-status"] for r in second] == ["HIT"] * len(urls)
    assert [r.content for r in second] == [r.content for r in first]
    # A held copy: 304 (nginx answers it from the cache with the API's ETag, made weak when nginx
    # gzips the body: the run's answer is past gzip_min_length).
    etag = second[0].headers["etag"]
    assert etag.removeprefix("W/").startswith('"') and proxy.get(urls[0], headers={"If-None-Match": etag}).status_code == 304
    # The team, by token or session cookie: always the API, never stored, never the public's copy.
    for headers in ({"Authorization": f"Bearer {cached['token']}"}, {"Cookie": "runcast_session=anything"}):
        for u in urls:
            t = proxy.get(u, headers=headers)
            assert t.headers["x-cache-status"] == "BYPASS", u
            assert t.headers["cache-control"] == "private, no-store", u
            assert "Authorization" in t.headers["vary"] and "Cookie" in t.headers["vary"]
    assert [proxy.get(u).headers["x-cache-status"] for u in urls] == ["HIT"] * len(urls)


def test_a_withheld_key_leaves_the_cached_reads_and_the_follower_within_the_edge_lifetime(cached: Any) -> None:
    w = RunWriter(cached["api"], cached["token"]).start()
    for _ in range(6):
        w.batch(2, KEYS)
    proxy, run = cached["proxy"], f"/api/v1/runs/{w.run}"
    follower = Follower(proxy, w.run)
    follower.poll()
    assert {k[0] for k in follower.points} == set(KEYS)
    assert set(KEYS) <= set(proxy.get(run).json()["keys"]) and proxy.get(run).headers["x-cache-status"] == "HIT"
    assert proxy.get(run + "/metrics?key=loss").status_code == 200
    _put(cached, w.run, {"metrics": ["lr"]})  # withhold loss
    time.sleep(max(EDGE_LIFETIME, READ_LIFETIME))
    follower.poll()
    assert follower.resets == 1 and {k[0] for k in follower.points} == {"lr"}
    detail = proxy.get(run)
    assert "loss" not in detail.json()["keys"], detail.headers.get("x-cache-status")
    assert proxy.get(run + "/metrics?key=loss").status_code == 404
