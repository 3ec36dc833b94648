"""The cacheable broadcast through the shipped nginx site and its cache: followers through the
cache hold exactly the API's points, a crowd's identical requests cost the API one, the team's
answers never enter the cache (nor do anonymous ones reach the team), and a delayed run's
cached objects never hold a version before it is due."""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Processes
from prometheus_client.parser import text_string_to_metric_families
from stream.broadcast_follower import Follower, api_points
from stream.helpers import RunWriter

from topology.nginx import Nginx

P = 4
KEYS = ["loss", "lr"]
EDGE_ROUTE = "/api/v1/runs/{run_id}/broadcast/edge"
PIECE_ROUTE = "/api/v1/runs/{run_id}/broadcast/pieces/{piece}"
# How long nginx may answer with an edge (deploy/nginx): a copy is read only in the one-second
# period of nginx's clock it was stored in; the first read of the next period goes to the API.
EDGE_LIFETIME = 1.2
# The same for the run's other reads (two-second periods).
READ_LIFETIME = 2.2


@pytest.fixture(scope="module")
def cached(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """An embedded ``runcast serve`` (pieces of P versions) with nginx in front."""
    tmp = tmp_path_factory.mktemp("cached")
    files_root = Path(tempfile.mkdtemp(prefix="runcast-files-"))
    files_root.chmod(0o755)
    processes = Processes(request, tmp)
    proxy = None
    try:
        data = {"RUNCAST_DATA_DIR": str(tmp / "data")}
        token = processes.cli("token", "create", "--project", "demo", **data).stdout.strip().splitlines()[-1]
        processes.start_api(**data, RUNCAST_BROADCAST_PIECE_VERSIONS=str(P))
        proxy = Nginx([processes.api_url], files_root, tmp / "logs").start()
        with httpx.Client(base_url=processes.api_url, timeout=30) as api, \
                httpx.Client(base_url=proxy.url, timeout=30) as edge:
            yield {"api": api, "proxy": edge, "token": token}
    finally:
        if proxy is not None:
            proxy.stop()
        processes.stop()
        shutil.rmtree(files_root, ignore_errors=True)


def origin_requests(api: httpx.Client, route: str) -> float:
    """How many GETs of ``route`` the API process answered (its own /metrics). Parsed, not
    matched by a pattern: the route's own braces (``{run_id}``) are inside the label set."""
    return sum(s.value for f in text_string_to_metric_families(api.get("/metrics").text) for s in f.samples
               if s.name == "runcast_http_request_duration_seconds_count" and s.labels["route"] == route)


def _put(c: dict[str, Any], run: str, body: dict[str, Any]) -> None:
    r = c["api"].put(f"/api/v1/runs/{run}/policy", json=body, headers={"Authorization": f"Bearer {c['token']}"})
    assert r.status_code == 200, r.text


def test_followers_through_the_cache_hold_the_api_points_and_a_crowd_costs_one_request(cached: Any) -> None:
    w = RunWriter(cached["api"], cached["token"]).start()
    followers = [Follower(cached["proxy"], w.run) for _ in range(3)]
    for i in range(14):
        w.batch(3, KEYS, note=f"note {i}")
        followers[i % 3].poll()
        time.sleep(0.1)
    time.sleep(EDGE_LIFETIME)
    truth = api_points(cached["api"], w.run, KEYS)
    for f in followers:
        f.poll()
        assert f.points == truth and f.notes == w.notes
    statuses = [r.headers.get("x-cache-status") for f in followers for r in f.responses]
    assert "HIT" in statuses and None not in statuses

    # A crowd: 60 identical requests at once for the edge, and 60 for a piece not asked before.
    time.sleep(EDGE_LIFETIME)
    fp = followers[0].policy
    before = {route: origin_requests(cached["api"], route) for route in (EDGE_ROUTE, PIECE_ROUTE)}
    late = f"/api/v1/runs/{w.run}/broadcast/pieces/{followers[0].version // P - 1}?policy={fp}"
    with ThreadPoolExecutor(30) as pool:
        crowd = list(pool.map(lambda i: cached["proxy"].get(f"/api/v1/runs/{w.run}/broadcast/edge" if i % 2 else late),
                              range(120)))
    assert all(r.status_code == 200 for r in crowd)
    after = {route: origin_requests(cached["api"], route) for route in (EDGE_ROUTE, PIECE_ROUTE)}
    assert after[EDGE_ROUTE] - before[EDGE_ROUTE] >= 1  # the expired edge was fetched (the counter counts)
    assert after[PIECE_ROUTE] - before[PIECE_ROUTE] <= 1
    bodies = {r.content for r in crowd if "/pieces/" in str(r.url)}
    assert len(bodies) == 1


def test_a_burst_on_an_expired_edge_costs_the_origin_one_or_two_requests(cached: Any) -> None:
    """Found by bench/broadcast_crowd.py: nginx's lock collapsed misses of new elements only, and a
    burst on an edge past its stale-while-revalidate all went to the origin."""
    w = RunWriter(cached["api"], cached["token"]).start()
    edge = f"/api/v1/runs/{w.run}/broadcast/edge"

    def burst() -> float:
        before = origin_requests(cached["api"], EDGE_ROUTE)
        with ThreadPoolExecutor(30) as pool:
            crowd = list(pool.map(lambda _: cached["proxy"].get(edge), range(60)))
        assert all(r.status_code == 200 for r in crowd)
        return origin_requests(cached["api"], EDGE_ROUTE) - before

    # Expired long ago (the bench's case): stored, then idle past its life.
    w.batch(3, KEYS)
    assert cached["proxy"].get(edge).status_code == 200
    w.batch(3, KEYS)
    time.sleep(EDGE_LIFETIME + 2)
    assert burst() <= 2  # one; two if the burst crossed a period
    # A crowd polling while the run moves: about one request a second, however many poll.
    stop, polls = time.time() + 3, []

    def poll() -> None:
        while time.time() < stop:
            polls.append(cached["proxy"].get(edge).status_code)

    before = origin_requests(cached["api"], EDGE_ROUTE)
    with ThreadPoolExecutor(20) as pool:
        pollers = [pool.submit(poll) for _ in range(20)]
        while time.time() < stop:
            w.batch(1, KEYS)
            time.sleep(0.1)
        for f in pollers:
            f.result()
    assert set(polls) == {200} and len(polls) > 100
    assert origin_requests(cached["api"], EDGE_ROUTE) - before <= 5  # 3 s: 3 or 4 periods, and a margin of one


def _until_period_start(period: int = 2) -> None:
    """Sleep until just after nginx's next period begins (the same clock: this machine's)."""
    time.sleep(period - time.time() % period + 0.05)


def test_no_reader_gets_an_edge_older_than_the_bound(cached: Any) -> None:
    """"updating" serves stale copies: a lone reader after a pause, or a crowd polling while the run
    moves, still gets an edge at most EDGE_LIFETIME (plus the API's answer time) behind."""
    w = RunWriter(cached["api"], cached["token"]).start()
    w.batch(1, KEYS)
    edge = f"/api/v1/runs/{w.run}/broadcast/edge"
    proxy = cached["proxy"]
    assert proxy.get(edge).json()["version"] == 2
    w.batch(1, KEYS)
    time.sleep(EDGE_LIFETIME + 3)  # idle: the copy expired long ago
    assert proxy.get(edge).json()["version"] == 3
    committed: list[tuple[float, int]] = []  # (when the API had stored it, version)
    seen: list[tuple[float, int]] = []  # (when a reader asked, the version it got)
    stop = time.time() + 6

    def read() -> None:
        while time.time() < stop:
            asked = time.time()
            seen.append((asked, proxy.get(edge).json()["version"]))
            time.sleep(0.05)

    with ThreadPoolExecutor(8) as pool:
        readers = [pool.submit(read) for _ in range(6)]
        while time.time() < stop:
            w.batch(1, KEYS)
            committed.append((time.time(), 4 + len(committed)))  # versions 4, 5...
            time.sleep(0.1)
        for r in readers:
            r.result()
    for asked, version in seen:
        due = max((v for at, v in committed if at <= asked - EDGE_LIFETIME), default=3)
        assert version >= due, (asked, version, due)


def test_the_team_and_the_public_never_share_a_cached_answer(cached: Any) -> None:
    w = RunWriter(cached["api"], cached["token"]).start()
    _put(cached, w.run, {"metrics": ["lr"]})  # the public sees lr only
    for _ in range(7):  # versions 3..9: the edge holds version 9
        w.batch(2, KEYS)
    proxy, edge = cached["proxy"], f"/api/v1/runs/{w.run}/broadcast/edge"
    team = {"Authorization": f"Bearer {cached['token']}"}
    # The team first, on a URL nothing has cached: its answer is not stored.
    t = proxy.get(edge, headers=team)
    assert t.headers["x-cache-status"] == "BYPASS" and t.headers["cache-control"] == "private, no-store"
    assert '"loss"' in t.text
    _until_period_start(1)  # the MISS and the HIT after it fall in the same one-second period
    a = proxy.get(edge)
    assert a.headers["x-cache-status"] == "MISS" and '"loss"' not in a.text
    assert proxy.get(edge).headers["x-cache-status"] == "HIT"
    # The public's cached answer never reaches a token or a session cookie.
    for headers in (team, {"Cookie": "runcast_session=anything"}):
        t = proxy.get(edge, headers=headers)
        assert t.headers["x-cache-status"] == "BYPASS" and t.headers["cache-control"] == "private, no-store"
    assert '"loss"' in proxy.get(edge, headers=team).text
    # Pieces: each side's fingerprint is its own, and the other's is refused by the origin.
    team_fp, public_fp = proxy.get(edge, headers=team).json()["policy"], a.json()["policy"]
    assert team_fp != public_fp
    tp = proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={team_fp}", headers=team)
    assert tp.status_code == 200 and tp.headers["x-cache-status"] == "BYPASS" and '"loss"' in tp.text
    crossed = proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={team_fp}")
    assert crossed.status_code == 409 and crossed.headers["x-cache-status"] == "MISS"
    assert proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={team_fp}").status_code == 409  # not cached
    ap = proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={public_fp}")
    assert ap.status_code == 200 and '"loss"' not in ap.text
    assert proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={public_fp}").headers["x-cache-status"] == "HIT"
    again = proxy.get(f"/api/v1/runs/{w.run}/broadcast/pieces/0?policy={public_fp}", headers=team)
    assert again.status_code == 409 and again.headers["x-cache-status"] == "BYPASS"

    # A policy change reaches a follower through the cache within the edge's lifetime.
    follower = Follower(proxy, w.run)
    follower.poll()
    assert {k[0] for k in follower.points} == {"lr"}
    _put(cached, w.run, {"metrics": "all"})
    time.sleep(EDGE_LIFETIME)
    follower.poll()
    assert follower.resets == 1 and {k[0] for k in follower.points} == set(KEYS)


def test_a_delayed_run_s_cached_objects_never_hold_a_version_early(cached: Any) -> None:
    delay = 2.0
    w = RunWriter(cached["api"], cached["token"]).start()  # 1
    _put(cached, w.run, {"delay_s": delay})  # 2
    sent: dict[int, float] = {}
    followers = [Follower(cached["proxy"], w.run) for _ in range(2)]
    seen: list[tuple[float, int]] = []
    for v in range(3, 3 + 24):  # 6 s: versions come due from 2 s on; an edge lives up to 2 s
        sent[v] = time.time()
        w.batch(1, KEYS[:1])
        for f in followers:
            f.poll()
            now = time.time()
            for r in f.responses:
                body = r.json()
                seen.extend((now, x) for x in [body.get("version", 0), *(m["version"] for m in body["messages"])])
            f.responses.clear()
        time.sleep(0.2)
    assert max(v for _, v in seen) >= 8  # the followers did see the run move
    for at, v in seen:
        assert v not in sent or sent[v] <= at - delay, (v, at - sent[v])
    time.sleep(delay + EDGE_LIFETIME)
    for f in followers:
        f.poll()
        assert f.version == 26 and f.points == api_points(cached["api"], w.run, KEYS[:1])
