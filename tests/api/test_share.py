"""Sharing routes from a reader's seat: the embed page, the badge, the figures and CORS.

Each route follows the run's visibility exactly as the REST reads do (a private run is the
404 of an unknown id to anyone without its project's token; an unlisted run is reachable by
id), shows no path, host or pid, escapes every text it draws, and answers bad parameters
with a 4xx JSON body naming the field.
"""

from __future__ import annotations

import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import services
from artifacts.live import LiveServer
from runcast_server.core.settings import Settings

UNKNOWN = "unknownrun000000"
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '"><script>alert(1)</script><x a=\'b\' & c'
ENV = {"host": "secret-host.internal", "pid": 424242, "user": "alice", "cwd": "/home/alice/secret-dir"}


def routes(run: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"/embed/runs/{run}", {"key": "loss"}),
        (f"/badge/runs/{run}.svg", {"key": "loss"}),
        (f"/api/v1/runs/{run}/plot.svg", {"key": "loss"}),
        (f"/api/v1/runs/{run}/plot.png", {"key": "loss"}),
    ]


@pytest.fixture
def runs(seed: Any) -> dict[str, str]:
    out = {}
    for visibility in ("public", "unlisted", "private"):
        sim = seed.run("pproj", name=f"{visibility} run").start(visibility=visibility, env=ENV)
        sim.log({"loss": [(s, 2.0 / s) for s in range(1, 51)]})
        out[visibility] = sim.run
    return out


def test_each_route_follows_the_runs_visibility(client, seed, runs):
    p_auth = {"Authorization": f"Bearer {seed.token('pproj')}"}
    q_auth = {"Authorization": f"Bearer {seed.token('qproj')}"}
    for visibility, run in runs.items():
        for (path, params), (unknown_path, _) in zip(routes(run), routes(UNKNOWN), strict=True):
            for headers in ({}, q_auth):
                res = client.get(path, params=params, headers=headers)
                if visibility == "private":
                    unknown = client.get(unknown_path, params=params, headers=headers)
                    assert (res.status_code, res.text.replace(run, "<RUN>")) == (
                        unknown.status_code, unknown.text.replace(UNKNOWN, "<RUN>")), (path, headers)
                    assert res.status_code == 404 and res.json()["error"]["field"] == "run"
                else:
                    assert res.status_code == 200, (path, headers, res.text)
            assert client.get(path, params=params, headers=p_auth).status_code == 200, path
    # Unlisted: reachable by id, listed to nobody but its project.
    listed = [r["id"] for r in client.get("/api/v1/runs").json()["runs"]]
    assert runs["public"] in listed and runs["unlisted"] not in listed and runs["private"] not in listed


def test_no_route_shows_a_path_host_user_or_pid(client, runs):
    for run in runs.values():
        for path, params in routes(run):
            res = client.get(path, params=params)
            if res.status_code == 200:
                for secret in ("secret-host", "424242", "alice", "secret-dir"):
                    assert secret.encode() not in res.content, (path, secret)


def _badge(client: Any, run: str, **params: Any) -> ET.Element:
    res = client.get(f"/badge/runs/{run}.svg", params=params)
    assert res.status_code == 200, res.text
    assert res.headers["content-type"] == "image/svg+xml"
    return ET.fromstring(res.content)


def test_badge_shows_status_step_and_last_value(client, runs):
    svg = _badge(client, runs["public"], key="loss")
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert texts == ["public run", "running · step 50 · loss 0.04"]
    assert svg.find(f"{SVG}title").text == "public run: running · step 50 · loss 0.04"
    # Without a key: status and step; a key never logged: a dash, not an error.
    assert [t.text for t in _badge(client, runs["public"]).iter(f"{SVG}text")][1] == "running · step 50"
    assert [t.text for t in _badge(client, runs["public"], key="nope").iter(f"{SVG}text")][1] == \
        "running · step 50 · nope –"


def test_badge_text_is_escaped_and_sized_to_it(client, seed):
    sim = seed.run(name=HOSTILE).start()
    sim.log({HOSTILE: [(1, 1.5)]})
    svg = _badge(client, sim.run, key=HOSTILE)
    assert not [e for e in svg.iter() if e.tag not in {f"{SVG}{t}" for t in ("svg", "title", "clipPath", "rect", "g", "text")}]
    label, message = [t.text for t in svg.iter(f"{SVG}text")]
    assert label == HOSTILE and message == f"running · step 1 · {HOSTILE} 1.5"  # 39 characters: not cut
    assert svg.get("aria-label") == f"{HOSTILE}: {message}"
    # The label override too, and control characters (not XML) are dropped.
    svg = _badge(client, sim.run, label='"\x01<b>')
    assert next(t.text for t in svg.iter(f"{SVG}text")) == '"<b>'
    # Width follows the text: the two parts' rects add up to the badge, a longer name is wider.
    short = _badge(client, seed.run(name="a").start().run)
    long = _badge(client, seed.run(name="a much longer run name").start().run)
    for svg in (short, long):
        rects = [r for r in svg.iter(f"{SVG}rect") if r.get("fill")]
        assert sum(int(r.get("width")) for r in rects) == int(svg.get("width"))
        assert float(next(iter(svg.iter(f"{SVG}text"))).get("textLength")) + 12 <= int(rects[0].get("width"))
    assert int(long.get("width")) - int(short.get("width")) > 100


def test_badge_updates_and_revalidates(client, seed, auth):
    sim = seed.run(name="live").start()
    sim.log({"loss": [(1, 3.0)]})
    url = f"/badge/runs/{sim.run}.svg"
    first = client.get(url, params={"key": "loss"})
    assert first.headers["cache-control"] == "public, max-age=15, must-revalidate"
    # Opened on its own, the image runs nothing.
    assert first.headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    assert first.headers["x-content-type-options"] == "nosniff"
    etag = first.headers["etag"]
    again = client.get(url, params={"key": "loss"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    sim.log({"loss": [(2, 2.5)]})
    moved = client.get(url, params={"key": "loss"}, headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.headers["etag"] != etag
    assert b"step 2 \xc2\xb7 loss 2.5" in moved.content
    sim.finish()
    assert b"finished" in client.get(url).content
    # What a token showed is for its holder alone.
    assert client.get(url, headers=auth(seed.token())).headers["cache-control"] == "private, no-cache"


@pytest.mark.parametrize(("path", "params", "status", "field"), [
    ("/badge/runs/{run}.svg", {"key": ""}, 422, "key"),
    ("/badge/runs/{run}.svg", {"key": "k" * 201}, 422, "key"),
    ("/badge/runs/{run}.svg", {"label": "l" * 101}, 422, "label"),
    ("/embed/runs/{run}", {}, 422, "key"),
    ("/embed/runs/{run}", {"key": ""}, 422, "key"),
    ("/api/v1/runs/{run}/plot.svg", {}, 422, "key"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "loss", "width": 10}, 422, "width"),
    ("/api/v1/runs/{run}/plot.png", {"key": "loss", "height": 99999}, 422, "height"),
    ("/api/v1/runs/{run}/plot.png", {"key": "loss", "scale": 9}, 422, "scale"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "loss", "start": 10, "end": 5}, 422, "end"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "loss", "start": -1}, 422, "start"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "loss", "log": "maybe"}, 422, "log"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "nope"}, 404, "key"),
    ("/api/v1/runs/{run}/plot.svg", {"key": "loss", "segment": 7}, 404, "segment"),
    ("/badge/runs/{bad}.svg", {}, 404, "run"),
])
def test_bad_parameters_are_json_errors_naming_the_field(client, runs, path, params, status, field):
    res = client.get(path.format(run=runs["public"], bad="no%20such"), params=params)
    assert res.status_code == status, res.text
    assert res.headers["content-type"] == "application/json"
    assert res.json()["error"]["field"] == field


def _path_points(group: ET.Element) -> list[tuple[float, float]]:
    (path,) = group.iter(f"{SVG}path")
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", path.get("d"))]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def test_a_one_step_spike_in_a_hundred_thousand_points_shows_in_the_svg(client, seed):
    sim = seed.run(name="spiky").start()
    spike_at, n = 61_234, 100_000
    sim.log({"loss": [(s, 100.0 if s == spike_at else 1.0 + (s % 10) / 1000) for s in range(1, n + 1)]})
    res = client.get(f"/api/v1/runs/{sim.run}/plot.svg", params={"key": "loss", "width": 800})
    assert res.status_code == 200 and res.headers["content-type"] == "image/svg+xml"
    svg = ET.fromstring(res.content)
    groups = {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("id")}
    area = _path_points(groups["plot-area"])
    left, right = min(x for x, _ in area), max(x for x, _ in area)
    top, bottom = min(y for _, y in area), max(y for _, y in area)
    high = _path_points(groups["max-seg0"])
    peak_x, peak_y = min(high, key=lambda p: p[1])
    # The spike is the top of the plot (matplotlib's 5 % margin), at its step's place on the x axis.
    assert peak_y - top < 0.06 * (bottom - top)
    first, last = 1, n
    data_left = left + (right - left) * 0.05 / 1.1  # the x margin, as for y
    data_right = right - (right - left) * 0.05 / 1.1
    expected_x = data_left + (spike_at - first) / (last - first) * (data_right - data_left)
    assert abs(peak_x - expected_x) < 0.01 * (right - left)
    # Every other bucket's max stays near the bottom: one spike, not a raised curve.
    assert sorted(y for _, y in high)[len(high) // 2] > bottom - 0.1 * (bottom - top)
    # The mean line alone would hide it (a 1-in-64 bucket): the band is what shows it.
    assert min(y for _, y in _path_points(groups["line-seg0"])) > top + 0.5 * (bottom - top)
    # The same data makes the same bytes (a stable ETag), the PNG is a PNG of the asked size.
    assert client.get(f"/api/v1/runs/{sim.run}/plot.svg", params={"key": "loss", "width": 800}).content == res.content
    png = client.get(f"/api/v1/runs/{sim.run}/plot.png", params={"key": "loss", "width": 640, "height": 360, "scale": 2})
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png.content[16:20], "big") == 1280 and int.from_bytes(png.content[20:24], "big") == 720


def test_plot_titles_are_text_not_markup(client, seed):
    sim = seed.run(name=HOSTILE + " $x^2$").start()
    sim.log({"loss": [(1, 1.0), (2, 0.5)]})
    res = client.get(f"/api/v1/runs/{sim.run}/plot.svg", params={"key": "loss"})
    svg = ET.fromstring(res.content)
    assert not [e for e in svg.iter() if e.tag.endswith("script")]
    assert HOSTILE + " $x^2$" in [t.text for t in svg.iter(f"{SVG}text")]


def test_plot_range_and_segments(client, seed):
    sim = seed.run(name="restarts").start()
    sim.log({"loss": [(s, 1.0) for s in range(1, 101)]})
    sim.resume(60)
    sim.log({"loss": [(s, 0.5) for s in range(60, 121)]})
    svg = ET.fromstring(client.get(f"/api/v1/runs/{sim.run}/plot.svg",
                                   params={"key": "loss", "start": 50, "end": 110}).content)
    ids = {g.get("id") for g in svg.iter(f"{SVG}g")}
    # Segment 0 up to the restart, its abandoned branch after it, segment 1.
    assert {"line-seg0", "line-seg0-abandoned", "line-seg1"} <= ids


def _line_points(group: ET.Element) -> list[tuple[float, float]]:
    """The vertices of a line's path (its markers, when drawn, are further paths)."""
    path = next(group.iter(f"{SVG}path"))
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", path.get("d"))]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


@pytest.mark.parametrize(("relogged", "kept_to"), [(False, 60), (True, 59)])
def test_a_resume_at_a_checkpoint_keeps_its_step_in_the_figure(client, seed, relogged, kept_to):
    """Resumed from the checkpoint of step 60: segment 0's steps after 60 are the abandoned branch and
    its step 60 is kept, unless segment 1 logs step 60 itself (then segment 1's value is the live one)."""
    sim = seed.run(name="checkpointed").start()
    sim.log({"loss": [(s, 1.0) for s in range(1, 101)]})
    sim.resume(60)
    sim.log({"loss": [(s, 0.5) for s in range(60 if relogged else 61, 121)]})
    answer = client.get(f"/api/v1/runs/{sim.run}/metrics", params={"key": "loss"}).json()
    assert [(s["segment"], s["step"][0], s["step"][-1]) for s in answer["series"]] == [
        (0, 1, 100), (1, 60 if relogged else 61, 120)]  # the API keeps every point under its segment
    svg = ET.fromstring(client.get(f"/api/v1/runs/{sim.run}/plot.svg", params={"key": "loss"}).content)
    groups = {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("id")}
    kept, gone = (_line_points(groups[gid]) for gid in ("line-seg0", "line-seg0-abandoned"))
    assert len(kept) == kept_to  # steps 1..kept_to
    assert len(gone) == 100 - kept_to + 1 and gone[0] == kept[-1]  # forks from the last kept point


def test_embed_page_frame_policy(client, runs):
    res = client.get(f"/embed/runs/{runs['public']}", params={"key": "loss"})
    assert res.headers["content-security-policy"] == "frame-ancestors *"
    # The embed page's script, versioned: its install-time bundle, or its module without one.
    assert re.search(rb'<script type="module" src="/(dist|js)/embed\.js\?v=[0-9a-f]{16}"', res.content)
    # Every other page may be framed only by the dashboard itself (clickjacking).
    for path in ("/", f"/runs/{runs['public']}", "/compare", "/docs", "/redoc"):
        res = client.get(path)
        assert res.headers["content-security-policy"] == "frame-ancestors 'self'", path
        assert res.headers["x-content-type-options"] == "nosniff", path


def test_frame_policy_and_origins_come_from_settings(embedded_env, monkeypatch, seed):
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    monkeypatch.setenv("RUNCAST_EMBED_FRAME_ANCESTORS", "'self'  https://blog.example.org")
    monkeypatch.setenv("RUNCAST_CORS_ALLOW_ORIGINS", "https://blog.example.org, https://docs.example.org/")
    with TestClient(create_app()) as client:
        run = seed.run(name="framed").start().run
        res = client.get(f"/embed/runs/{run}", params={"key": "loss"})
        assert res.headers["content-security-policy"] == "frame-ancestors 'self' https://blog.example.org"
        for origin, allowed in (("https://docs.example.org", True), ("https://evil.example.com", False)):
            res = client.get(f"/api/v1/runs/{run}", headers={"Origin": origin})
            assert res.status_code == 200
            assert res.headers.get("access-control-allow-origin") == (origin if allowed else None)
    monkeypatch.setenv("RUNCAST_CORS_ALLOW_ORIGINS", "")
    with TestClient(create_app()) as client:
        res = client.get(f"/api/v1/runs/{run}", headers={"Origin": "https://blog.example.org"})
        assert res.status_code == 200 and "access-control-allow-origin" not in res.headers
    for bad in ("* ; script-src *", "https://a.org, https://b.org", "", "'unsafe-inline'"):
        with pytest.raises(ValueError, match="EMBED_FRAME_ANCESTORS"):
            Settings(embed_frame_ancestors=bad)
    for bad in ("blog.example.org", "https://a.org/path", "https://a.org\r\nX: y"):
        with pytest.raises(ValueError, match="CORS_ALLOW_ORIGINS"):
            Settings(cors_allow_origins=bad)


def test_cors_preflight_for_reads_and_never_for_writes(client, runs, seed):
    origin = {"Origin": "https://blog.example.org"}
    run = runs["public"]
    for path in (f"/api/v1/runs/{run}/metrics?key=loss", f"/api/v1/runs/{run}/stream", "/api/v1/runs",
                 f"/badge/runs/{run}.svg"):
        pre = client.options(path, headers={**origin, "Access-Control-Request-Method": "GET",
                                            "Access-Control-Request-Headers": "authorization"})
        assert pre.status_code == 200, path
        assert pre.headers["access-control-allow-origin"] == "*"
        assert "authorization" in pre.headers["access-control-allow-headers"].lower()
        assert "access-control-allow-credentials" not in pre.headers
    res = client.get(f"/api/v1/runs/{run}/metrics", params={"key": "loss"}, headers=origin)
    assert res.headers["access-control-allow-origin"] == "*"
    # Writes: the preflight names no origin (the browser never sends the request), and a
    # request sent anyway (a simple one needs no preflight) gets no CORS header either.
    token = {"Authorization": f"Bearer {seed.token('pproj')}"}
    for method, path in (("POST", "/api/v1/ingest"), ("PUT", f"/api/v1/runs/{run}/alerts/config"),
                         ("POST", "/api/v1/subscriptions"), ("DELETE", f"/api/v1/runs/{run}")):
        pre = client.options(path, headers={**origin, "Access-Control-Request-Method": method,
                                            "Access-Control-Request-Headers": "authorization,content-type"})
        assert "access-control-allow-origin" not in pre.headers, (method, path)
        sent = client.request(method, path, headers={**origin, **token}, content=b"{}")
        assert "access-control-allow-origin" not in sent.headers, (method, path)
    # The admin and subscription reads are not public reads either.
    for path in ("/api/v1/admin/inbox", "/api/v1/subscriptions/confirm"):
        assert "access-control-allow-origin" not in client.get(path, headers=origin).headers


def test_plot_cli_writes_what_the_route_draws(client, seed, auth, tmp_path):
    sim = seed.run(name="paper").start(visibility="private")
    sim.log({"loss": [(s, 1.0 / s) for s in range(1, 3001)]})
    token = seed.token()
    with LiveServer(client.app) as server:
        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            # Options first and "--" before the id: an id may begin with "-".
            return subprocess.run([str(services.BIN / "runcast"), "plot", *args[1:], "--", args[0]],
                                  env=services.child_env({}),
                                  capture_output=True, text=True, timeout=120, check=False)

        for name, params in (("fig.svg", {}), ("fig.png", {"scale": 2})):
            out = tmp_path / name
            res = cli(sim.run, "--key", "loss", "-o", str(out), "--server", server.url, "--token", token,
                      "--start", "10", "--end", "2000", *(["--scale", "2"] if params else []))
            assert res.returncode == 0, res.stderr
            expected = client.get(f"/api/v1/runs/{sim.run}/plot{out.suffix}", headers=auth(token),
                                  params={"key": "loss", "start": 10, "end": 2000, **params}).content
            assert out.read_bytes() == expected
        # Private without a token: the server's 404, exit 1; bad flags: exit 2 naming the flag.
        res = cli(sim.run, "--key", "loss", "-o", str(tmp_path / "x.svg"), "--server", server.url)
        assert res.returncode == 1 and "404" in res.stderr and not (tmp_path / "x.svg").exists()
    for args, flag in ((["-o", "x.pdf"], "--output"), (["-o", "x.svg", "--width", "5"], "--width"),
                       (["-o", "x.svg", "--start", "9", "--end", "3"], "--end")):
        res = cli(sim.run, "--key", "loss", *args)
        assert res.returncode == 2 and flag in res.stderr, res.stderr
    assert not Path("x.svg").exists()


def test_a_figure_revalidates_without_drawing_and_changes_with_the_run(client, seed, monkeypatch):
    from runcast_server.share.plot import Plotter

    sim = seed.run(name="fig").start()
    sim.log({"loss": [(s, 1.0 / s) for s in range(1, 101)]})
    url = f"/api/v1/runs/{sim.run}/plot.svg"
    first = client.get(url, params={"key": "loss"})
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "public, max-age=15, must-revalidate"
    assert first.headers["content-disposition"] == f'inline; filename="{sim.run}-loss.svg"'
    drawn: list[int] = []
    real = Plotter.render
    monkeypatch.setattr(Plotter, "render", lambda self, *a, **k: drawn.append(1) or real(self, *a, **k))
    again = client.get(url, params={"key": "loss"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and drawn == []
    assert client.get(url, params={"key": "loss", "width": 900}, headers={"If-None-Match": etag}).status_code == 200
    sim.log({"loss": [(101, 0.001)]})
    moved = client.get(url, params={"key": "loss"}, headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.headers["etag"] != etag and len(drawn) == 2


def test_too_many_figures_at_once_is_a_503_not_a_stuck_server(client, runs, monkeypatch):
    import threading

    from runcast_server.share.plot import Plotter, PlotterBusy

    def busy(*args: Any, **kwargs: Any) -> bytes:
        raise PlotterBusy

    monkeypatch.setattr(Plotter, "render", busy)
    res = client.get(f"/api/v1/runs/{runs['public']}/plot.png", params={"key": "loss"})
    assert res.status_code == 503 and res.headers["retry-after"] == "5"
    assert res.json()["error"]["message"] == "busy drawing other figures; retry later"
    monkeypatch.undo()
    # The plotter itself: one figure drawn at a time, `queue` requests in all (the one drawing
    # included) waiting at most `wait_s`; one more is refused at once.
    for queue, wait_s, at_most in ((2, 0.2, 5.0), (1, 30.0, 5.0)):
        plotter = Plotter(queue=queue, wait_s=wait_s)
        started, release = threading.Event(), threading.Event()

        def slow(*args: Any, started=started, release=release) -> bytes:
            started.set()
            release.wait(30)
            return b"done"

        monkeypatch.setattr(plotter, "_render", slow)
        results: list[bytes] = []
        first = threading.Thread(target=lambda p=plotter, r=results: r.append(p.render(None, [], None, "svg")))
        first.start()
        try:
            assert started.wait(10)
            began = time.monotonic()
            with pytest.raises(PlotterBusy):
                plotter.render(None, [], None, "svg")  # type: ignore[arg-type]
            assert time.monotonic() - began < at_most  # queue 1: no slot; queue 2: after wait_s, not 30 s
        finally:
            release.set()
            first.join(10)
        assert results == [b"done"]
