"""Static files: versioned bundles cached as immutable, pages and modules revalidated,
bodies compressed when the client accepts it, no path out of ``frontend/``, and the
Plotly.js partial bundle served when installed, the plotly package's full one otherwise."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import posixpath
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import brotli
import pytest
from fastapi.testclient import TestClient
from runcast_server.app import FRONTEND_DIR, create_app
from runcast_server.web.assets import (
    IMMUTABLE,
    REVALIDATE,
    Asset,
    FileAssets,
    accepted_codings,
    choose_coding,
)
from runcast_server.web.frontend import Frontend
from runcast_server.core.settings import Settings
from runcast_server.web.vendor import (
    PLOTLY_NPM_FILE,
    PLOTLY_NPM_PACKAGE,
    load_vendor,
    plotly_package_bundle,
)

VERSIONED = re.compile(r'"(/vendor/([0-9a-f]{16})/([\w.-]+))"')


def raw_get(client: Any, url: str, **headers: str) -> tuple[Any, bytes]:
    """The response and its body as sent (httpx would decode gzip and br)."""
    with client.stream("GET", url, headers=headers) as res:
        return res, b"".join(res.iter_raw())


def decode(body: bytes, coding: str | None) -> bytes:
    return {"gzip": gzip.decompress, "br": brotli.decompress, None: lambda b: b}[coding](body)


def test_pages_link_versioned_bundles_served_immutable_and_compressed(client):
    vendor = load_vendor(Settings().vendor_dir)
    for page in ("/runs/some-run", "/compare"):
        links = VERSIONED.findall(client.get(page).text)
        assert [name for _, _, name in links] == ["plotly.min.js"]
    url, digest, _ = links[0]
    plotly = vendor.get("plotly.min.js")
    assert digest == plotly.digest
    expected = plotly.path.read_bytes()

    etags = set()
    for accept, coding in (("gzip, deflate, br, zstd", "br"), ("gzip, deflate", "gzip"), ("identity", None)):
        res, body = raw_get(client, url, **{"Accept-Encoding": accept})
        assert res.status_code == 200
        assert res.headers["cache-control"] == IMMUTABLE == "public, max-age=31536000, immutable"
        assert res.headers["vary"] == "Accept-Encoding"
        assert res.headers.get("content-encoding") == coding
        assert res.headers["content-type"].startswith("text/javascript")
        assert int(res.headers["content-length"]) == len(body)
        assert decode(body, coding) == expected
        if coding:
            assert len(body) < len(expected) / 2
        etags.add(res.headers["etag"])
        again = client.get(url, headers={"Accept-Encoding": accept, "If-None-Match": res.headers["etag"]})
        assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", res.headers["etag"])
    assert len(etags) == 3 and all(re.fullmatch(r'"[0-9a-f]{32}(-br|-gzip)?"', e) for e in etags)

    # The stable name and an out-of-date version: the same file, revalidated instead of kept.
    for other in ("/vendor/plotly.min.js", "/vendor/0123456789abcdef/plotly.min.js"):
        res = client.get(other)
        assert res.status_code == 200 and res.content == expected
        assert res.headers["cache-control"] == REVALIDATE
    assert client.get(f"/vendor/{digest}/nothing.js").status_code == 404


@pytest.mark.parametrize("path", ["/", "/runs/abc", "/compare", "/js/run.js", "/js/chart.js", "/style.css", "/docs", "/redoc"])
def test_pages_modules_and_styles_are_revalidated(client, path):
    res, body = raw_get(client, path, **{"Accept-Encoding": "gzip"})
    assert res.status_code == 200
    assert res.headers["cache-control"] == "no-cache"
    etag = res.headers["etag"]
    if len(decode(body, res.headers.get("content-encoding"))) >= 1024:
        assert res.headers["content-encoding"] == "gzip"
    unchanged = client.get(path, headers={"Accept-Encoding": "gzip", "If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    changed = client.get(path, headers={"If-None-Match": '"' + "0" * 32 + '"'})
    assert changed.status_code == 200 and changed.content == decode(body, res.headers.get("content-encoding"))
    head = client.head(path, headers={"Accept-Encoding": "gzip"})
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == etag


@pytest.fixture
def plain_client(embedded_env: Path) -> Any:
    """The app serving the plain modules (RUNCAST_PAGE_BUNDLES off), whether or not frontend/dist is built."""
    with TestClient(create_app(Settings(page_bundles=False))) as c:
        yield c


def test_frontend_files_are_the_files_on_disk(plain_client):
    client = plain_client
    assert client.get("/js/run.js").content == (FRONTEND_DIR / "js" / "run.js").read_bytes()
    assert client.get("/style.css").headers["content-type"].startswith("text/css")
    # Pages differ from the files only by the versions in their links, the import map, the
    # modulepreload links and the catalogs' addresses the server adds.
    unversioned = re.sub(
        r'\?v=[0-9a-f]{16}|<script type="importmap">.*?</script>\n  |<link rel="modulepreload" href="[^"]*" fetchpriority="low">\n  '
        r'|<script type="application/json" id="runcast-catalogs">.*?</script>\n',
        "", client.get("/").text,
    )
    assert unversioned == (FRONTEND_DIR / "index.html").read_text()


def _static_imports(rel: str) -> set[str]:
    """The modules that ``rel`` (``js/run.js``) imports, directly or not (read here independently)."""
    found, todo = set(), [rel]
    while todo:
        cur = todo.pop()
        if cur in found:
            continue
        found.add(cur)
        text = (FRONTEND_DIR / cur).read_text()
        for spec in re.findall(r'^(?:import|export)\b[^;]*?\bfrom\s*"(\.{1,2}/[^"]+)"', text, re.MULTILINE | re.DOTALL):
            todo.append(posixpath.normpath(posixpath.join(posixpath.dirname(cur), spec)))
    return found


@pytest.mark.parametrize("path,entry", [("/runs/abc", "js/run.js"), ("/compare", "js/compare.js"), ("/", "js/runs.js")])
def test_pages_preload_their_whole_module_graph(plain_client, path, entry):
    """A first load asks for every module at once (no waterfall of imports), each once, by version."""
    html = plain_client.get(path).text
    preloaded = re.findall(r'<link rel="modulepreload" href="/(js/[^"?]+)\?v=[0-9a-f]{16}"', html)
    assert len(preloaded) == len(set(preloaded))
    assert set(preloaded) == _static_imports(entry)
    assert html.index("importmap") < html.index("modulepreload") < html.index('type="module"')
    # Plotly.js is preloaded first, never run by the document: the page runs it after its first
    # light drawing (js/chart/sketch.js), so it holds neither the modules nor the first curve back.
    if path.startswith("/runs/"):
        assert re.search(r'<link rel="preload" as="script" href="/vendor/[0-9a-f]{16}/plotly\.min\.js" fetchpriority="low">', html)
        assert "<script src=\"/vendor/" not in html
        assert html.index("plotly.min.js") < html.index("<script>") < html.index('rel="stylesheet"') < html.index("modulepreload")


def test_api_docs_load_only_local_bundles(client):
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        refs = re.findall(r'(?:src|href)="([^"]*)"', html) + re.findall(r"url: '([^']*)'", html)
        assert refs and all(r.startswith("/") or r == "data:," for r in refs), refs
        assert not re.search(r"https?://", html)
        for ref in refs:
            if ref.startswith("/vendor/"):
                res = client.get(ref)
                assert res.status_code == 200 and res.headers["cache-control"] == IMMUTABLE
    assert '"validatorUrl": null' in client.get("/docs").text
    # ReDoc's side menu logo is the one address its bundle would fetch from elsewhere.
    redoc_url = re.search(r'src="(/vendor/[^"]+/redoc.standalone.js)"', client.get("/redoc").text).group(1)
    assert b"cdn.redoc.ly" not in client.get(redoc_url).content
    assert client.get("/openapi.json").json()["info"]["title"] == "Runcast"


@pytest.mark.parametrize(
    "path",
    ["/../pyproject.toml", "/%2e%2e/pyproject.toml", "/js/..%2f..%2fpyproject.toml", "/js/%2e%2e/%2e%2e/pyproject.toml",
     "/vendor/../../pyproject.toml", "/.git/HEAD", "/js", "/nothing.html", "/api/v1/nothing"],
)
def test_no_path_leaves_the_frontend(client, path):
    res = client.get(path)
    assert res.status_code == 404
    assert "error" in res.json()


def test_pages_link_modules_and_styles_by_version(plain_client):
    """A reload asks for the page alone: its scripts, modules and styles are kept as immutable."""
    client = plain_client
    html = client.get("/runs/abc").text
    modules = sorted(p.relative_to(FRONTEND_DIR).as_posix() for p in FRONTEND_DIR.glob("js/**/*.js"))
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', html).group(1))["imports"]
    assert sorted(imports) == [f"/{m}" for m in modules]
    links = re.findall(r'(?:src|href)="(/(?:js/|style\.css)[^"]*)"', html)
    assert imports["/js/run.js"] in links and any(u.startswith("/style.css?v=") for u in links)
    assert all(re.search(r"\?v=[0-9a-f]{16}$", u) for u in links), links
    assert {u for u in links if u.startswith("/js/")} <= set(imports.values())
    # The import map precedes every module script and preload, which name the same versions.
    assert html.index("importmap") < html.index("modulepreload") < html.index('type="module"')
    for url in set(links) | set(imports.values()):
        res = client.get(url)
        path, version = url.split("?v=")
        assert res.status_code == 200 and res.content == (FRONTEND_DIR / path.lstrip("/")).read_bytes()
        assert re.fullmatch("[0-9a-f]{16}", version) and res.headers["cache-control"] == IMMUTABLE
        assert client.get(path + "?v=0000000000000000").headers["cache-control"] == REVALIDATE
    assert re.search(r'href="/style\.css\?v=[0-9a-f]{16}"', client.get("/").text)
    assert '<a class="brand" href="/">' in html  # links to pages stay as they are


def test_module_graph_follows_every_static_import_form(tmp_path):
    js = tmp_path / "js"
    (js / "sub").mkdir(parents=True)
    (tmp_path / "page.html").write_text(
        '<head><link rel="modulepreload" href="/js/b.js">\n  <script type="module" src="/js/a.js"></script></head>'
    )
    (js / "a.js").write_text(
        '// import { no } from "./comment.js" is not a line that starts with import\n'
        'import {\n  one,\n  two,\n} from "./b.js";\nexport * from "./sub/c.js";\nimport "./d.js";\n'
        'const later = () => import("./lazy.js");\n'
    )
    (js / "b.js").write_text('import { a } from "./a.js";\n')  # a cycle
    (js / "sub" / "c.js").write_text('export { x } from "../b.js";\nimport y from "../missing.js";\n')
    (js / "d.js").write_text("export const d = 1;\n")
    (js / "lazy.js").write_text("export const lazy = 1;\n")
    frontend = Frontend(FileAssets(tmp_path), load_vendor(tmp_path / "none"))
    assert frontend.module_graph("js/a.js") == ["js/a.js", "js/b.js", "js/sub/c.js", "js/d.js"]
    html = frontend.page("page.html").body.decode()
    preloaded = re.findall(r'<link rel="modulepreload" href="/(js/[^"?]+)\?v=', html)
    # b.js was linked by hand already; a dynamic import is left to load when it is asked for.
    assert preloaded == ["js/b.js", "js/a.js", "js/sub/c.js", "js/d.js"]
    assert html.index("importmap") < html.index("modulepreload")


def test_an_edited_module_gets_a_new_version(tmp_path):
    root = tmp_path / "site"
    (root / "js").mkdir(parents=True)
    (root / "js" / "a.js").write_text("export const a = 1;")
    (root / "page.html").write_text('<head><script type="module" src="/js/a.js"></script></head>')
    frontend = Frontend(FileAssets(root), load_vendor(tmp_path / "none"))
    first = frontend.page("page.html")
    assert frontend.page("page.html") is first
    (root / "js" / "a.js").write_text("export const a = 2; // edited")
    second = frontend.page("page.html")
    v1, v2 = (re.search(rb"a\.js\?v=(\w+)", p.body).group(1) for p in (first, second))
    assert v1 != v2 and second.etag(None) != first.etag(None)


def test_file_assets_refuse_links_out_and_follow_edits(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (root / "out.txt").symlink_to(tmp_path / "secret.txt")
    (root / "page.html").write_text("<p>first</p>")
    files = FileAssets(root)
    assert files.get("out.txt") is None and files.get("../secret.txt") is None
    first = files.get("page.html")
    assert first.body == b"<p>first</p>" and files.get("page.html") is first
    (root / "page.html").write_text("<p>edited, longer than before</p>")
    assert files.get("page.html").body == b"<p>edited, longer than before</p>"


def test_content_coding_negotiation():
    text = Asset.of(b"x" * 2000, "text/javascript")
    assert accepted_codings("gzip;q=0, br;q=0.5, *;q=0") == {"br"}
    assert choose_coding(text, "gzip, deflate, br, zstd") == "br"
    assert choose_coding(text, "br;q=0, gzip") == "gzip"
    assert choose_coding(text, "GZIP;q=0.1") == "gzip"
    assert choose_coding(text, "*") == "gzip"
    assert choose_coding(text, "identity") is None
    assert choose_coding(text, "") is None
    assert choose_coding(Asset.of(b"x" * 100, "text/css"), "gzip") is None  # too small to gain
    assert choose_coding(Asset.of(b"x" * 5000, "image/png"), "gzip, br") is None  # already compressed


def _app_client(vendor_dir: Path) -> TestClient:
    return TestClient(create_app(Settings(vendor_dir=vendor_dir)))


def test_partial_bundle_when_installed_full_bundle_otherwise(embedded_env, tmp_path, caplog):
    modules = tmp_path / "node_modules"
    package = modules / PLOTLY_NPM_PACKAGE
    package.mkdir(parents=True)
    partial = b"/* a partial Plotly.js */ window.Plotly = {};" * 40
    (package / PLOTLY_NPM_FILE).write_bytes(partial)
    (package / "package.json").write_text(json.dumps({"name": PLOTLY_NPM_PACKAGE, "version": "9.8.7"}))

    caplog.set_level(logging.INFO, logger="runcast_server")
    with _app_client(modules) as client:
        assert client.get("/vendor/plotly.min.js").content == partial
        url = VERSIONED.search(client.get("/runs/r").text).group(1)
        assert client.get(url).content == partial
    assert f"the partial bundle {PLOTLY_NPM_PACKAGE} 9.8.7" in caplog.text

    caplog.clear()
    with _app_client(tmp_path / "empty") as client:
        full = plotly_package_bundle().read_bytes()
        assert client.get("/vendor/plotly.min.js").content == full
        url = VERSIONED.search(client.get("/compare").text).group(1)
        assert client.get(url).content == full
    warning = [r for r in caplog.records if r.levelno == logging.WARNING and "Plotly.js" in r.getMessage()]
    assert len(warning) == 1
    assert "full bundle of the plotly Python package" in warning[0].getMessage()
    assert "scripts/install" in warning[0].getMessage()


# --- page bundles (frontend/dist, built by vendor/build.mjs with esbuild) --------------------

REPO = FRONTEND_DIR.parent
BUILT = FRONTEND_DIR / "dist" / "manifest.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fake_site(root: Path) -> Frontend:
    """A page whose module a.js imports b.js, with a bundle of both and its manifest."""
    (root / "js").mkdir(parents=True)
    (root / "dist").mkdir()
    (root / "page.html").write_text('<head><script type="module" src="/js/a.js"></script></head>')
    (root / "js" / "a.js").write_text('import { b } from "./b.js";\nconsole.log(b);\n')
    (root / "js" / "b.js").write_text("export const b = 1;\n")
    (root / "dist" / "a.js").write_text("console.log(1);\n")
    manifest = {"bundles": {"js/a.js": {"file": "dist/a.js", "sha256": _sha(root / "dist" / "a.js"),
                                        "inputs": {r: _sha(root / r) for r in ("js/a.js", "js/b.js")}}}}
    (root / "dist" / "manifest.json").write_text(json.dumps(manifest))
    return Frontend(FileAssets(root), load_vendor(root / "none"))


def test_a_page_loads_its_bundle_while_it_is_up_to_date(tmp_path, caplog):
    root = tmp_path / "site"
    frontend = _fake_site(root)
    html = frontend.page("page.html").body.decode()
    assert re.search(r'<script type="module" src="/dist/a\.js\?v=[0-9a-f]{16}"></script>', html)
    # One module: no import map, no preloads of the plain modules.
    assert "importmap" not in html and "modulepreload" not in html and "/js/" not in html

    caplog.set_level(logging.WARNING, logger="runcast_server")
    (root / "js" / "b.js").write_text("export const b = 2; // edited after the build\n")
    for _ in range(2):
        html = frontend.page("page.html").body.decode()
        assert re.search(r'<script type="module" src="/js/a\.js\?v=[0-9a-f]{16}"></script>', html)
        assert "/dist/" not in html and "importmap" in html
        assert re.findall(r'modulepreload" href="/(js/[^"?]+)', html) == ["js/a.js", "js/b.js"]
    stale = [r.getMessage() for r in caplog.records if "older than" in r.getMessage()]
    assert len(stale) == 1 and "js/b.js" in stale[0] and "vendor/build.mjs" in stale[0]


@pytest.mark.parametrize("breakage", ["bundle edited", "bundle missing", "manifest garbled", "entry not built", "off"])
def test_plain_modules_whenever_the_bundle_cannot_be_trusted(tmp_path, breakage):
    root = tmp_path / "site"
    frontend = _fake_site(root)
    if breakage == "bundle edited":
        (root / "dist" / "a.js").write_text("console.log('half written');\n")
    elif breakage == "bundle missing":
        (root / "dist" / "a.js").unlink()
    elif breakage == "manifest garbled":
        (root / "dist" / "manifest.json").write_text("{not json")
    elif breakage == "entry not built":
        (root / "dist" / "manifest.json").write_text(json.dumps({"bundles": {}}))
    else:
        frontend = Frontend(FileAssets(root), load_vendor(root / "none"), bundles=False)
    html = frontend.page("page.html").body.decode()
    assert '<script type="module" src="/js/a.js?v=' in html and "/dist/" not in html


def test_build_script_bundles_every_page_entry(tmp_path):
    """vendor/build.mjs on a copy of frontend/: one bundle per page, built from the modules the page imports."""
    esbuild = REPO / "vendor" / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists() or shutil.which("node") is None:
        pytest.skip("esbuild (scripts/install with npm) or node is not installed")
    site = tmp_path / "frontend"
    shutil.copytree(FRONTEND_DIR, site, ignore=shutil.ignore_patterns("dist", "dist.tmp"))
    subprocess.run(["node", str(REPO / "vendor" / "build.mjs"), str(site)], check=True, capture_output=True, timeout=120)
    manifest = json.loads((site / "dist" / "manifest.json").read_text())["bundles"]
    assert sorted(manifest) == ["js/compare.js", "js/embed.js", "js/report.js", "js/run.js", "js/runs.js"]
    for entry, built in manifest.items():
        assert set(built["inputs"]) == _static_imports(entry)
        assert all(_sha(site / rel) == digest for rel, digest in built["inputs"].items())
        bundle = (site / built["file"]).read_text()
        assert _sha(site / built["file"]) == built["sha256"]
        # Self-contained: no static import left to fetch.
        assert not re.search(r'(?:^|[;}\s])import\s*(?:[\w{*][^;]*?from\s*)?["\']\.', bundle)


def _committed(rel: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), "show", f"HEAD:{rel}"], check=True, capture_output=True,
                          timeout=30).stdout


def test_committed_bundles_were_built_from_the_committed_modules():
    """frontend/dist in the last commit matches its modules: every install serves the bundles (no node
    needed), so a module committed without ``node vendor/build.mjs`` would quietly cost every page load."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    manifest = json.loads(_committed("frontend/dist/manifest.json"))["bundles"]
    assert sorted(manifest) == ["js/compare.js", "js/embed.js", "js/report.js", "js/run.js", "js/runs.js"]
    stale = []
    for entry, built in manifest.items():
        for rel, digest in [(built["file"], built["sha256"]), *built["inputs"].items()]:
            if hashlib.sha256(_committed(f"frontend/{rel}")).hexdigest() != digest:
                stale.append(f"{entry}: {rel}")
    assert not stale, f"run node vendor/build.mjs and commit frontend/dist with the modules: {stale}"


def test_installed_pages_load_their_bundles(client):
    """The checkout's pages (frontend/dist, committed and rebuilt by scripts/install) each ask for one
    module, kept as immutable."""
    assert BUILT.exists(), "frontend/dist/manifest.json is missing: it is committed with the modules"
    for path, bundle in (("/runs/abc", "run.js"), ("/compare", "compare.js"), ("/", "runs.js")):
        html = client.get(path).text
        scripts = re.findall(r'<script type="module" src="([^"]+)"></script>', html)
        assert len(scripts) == 1 and re.fullmatch(rf"/dist/{re.escape(bundle)}\?v=[0-9a-f]{{16}}", scripts[0]), scripts
        assert "importmap" not in html and "modulepreload" not in html
        res, body = raw_get(client, scripts[0], **{"Accept-Encoding": "br"})
        assert res.status_code == 200 and res.headers["cache-control"] == IMMUTABLE
        assert res.headers["content-encoding"] == "br" and res.headers["content-type"].startswith("text/javascript")
        assert decode(body, "br") == (FRONTEND_DIR / "dist" / bundle).read_bytes()
