"""The runs list (live badges, filter, sort) and the compare page."""

from __future__ import annotations

import math

HOSTILE = "<img src=x onerror=alert(1)>"


def test_runs_list_badges_follow_the_runs_without_reload(live_server, page):
    alpha = live_server.sdk_run(project="demo", name="alpha")
    alpha.log({"train/loss": 2.0}, step=1)
    beta = live_server.sdk_run(project="other", name=HOSTILE)
    beta.log({"train/loss": 3.0}, step=7)
    assert alpha.flush(timeout=20) and beta.flush(timeout=20)

    page.goto(live_server.url + "/")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 2")
    names = page.eval_on_selector_all("#runs tbody td.name a", "as => as.map(a => a.textContent)")
    assert names == [HOSTILE, "alpha"]  # newest first, names as text
    assert page.eval_on_selector_all("#runs img", "n => n.length") == 0

    alpha.finish()  # no reload: the list polls
    page.wait_for_function(
        """() => [...document.querySelectorAll('#runs tbody tr')]
             .some(r => r.querySelector('a').textContent === 'alpha' && r.querySelector('.badge').textContent === 'finished')""",
        timeout=15000,
    )
    page.fill("#filter", "alp")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert "q=alp" in page.url
    page.fill("#filter", "")
    page.click("th[data-sort='last_step'] button")  # largest step first
    page.wait_for_function("document.querySelector(\"th[data-sort='last_step']\").getAttribute('aria-sort') === 'descending'")
    assert page.eval_on_selector_all("#runs tbody td.name a", "as => as.map(a => a.textContent)") == [HOSTILE, "alpha"]
    page.click("th[data-sort='last_step'] button")  # again: smallest first
    page.wait_for_function("document.querySelector(\"th[data-sort='last_step']\").getAttribute('aria-sort') === 'ascending'")
    assert page.eval_on_selector_all("#runs tbody td.name a", "as => as.map(a => a.textContent)") == ["alpha", HOSTILE]
    assert page.dialogs == [] and page.errors == []


def test_compare_overlays_runs_on_one_metric(live_server, page):
    a = live_server.sdk_run(name="lr-1e-3")
    b = live_server.sdk_run(name="lr-3e-4")
    for s in range(1, 101):
        a.log({"train/loss": 3 * math.exp(-s / 30) + 1, "tokens_seen": float(s * 100)}, step=s)
        b.log({"train/loss": 3 * math.exp(-s / 60) + 1, "tokens_seen": float(s * 200)}, step=s)
    assert a.flush(timeout=20) and b.flush(timeout=20)

    page.goto(f"{live_server.url}/compare?runs={a.id},{b.id}&key=train/loss")
    page.wait_for_function(
        """() => { const gd = document.querySelector('#charts .js-plotly-plot');
             return gd && gd.data && gd.data.filter(t => t.meta && t.meta.role === 'smooth').length === 2; }""",
        timeout=20000,
    )
    names = page.evaluate(
        "() => document.querySelector('#charts .js-plotly-plot').data.filter(t => t.meta && t.meta.role === 'smooth').map(t => t.name)"
    )
    assert names == ["lr-1e-3 (demo)", "lr-3e-4 (demo)"]
    assert page.eval_on_selector_all("#legend a", "as => as.map(a => a.textContent)") == names

    # Aligned by tokens: each run's steps map through its own tokens_seen.
    page.goto(f"{live_server.url}/compare?runs={a.id},{b.id}&key=train/loss&x=tokens")
    page.wait_for_function(
        """() => { const gd = document.querySelector('#charts .js-plotly-plot');
             const raw = gd && gd.data ? gd.data.filter(t => t.meta && t.meta.role === 'raw') : [];
             return raw.length === 2 && raw[0].x[raw[0].x.length - 1] === 10000 && raw[1].x[raw[1].x.length - 1] === 20000; }""",
        timeout=20000,
    )
    assert "x=tokens" in page.url
    assert page.errors == []


def test_tags_and_groups_show_and_filter_the_runs_list(live_server, page):
    """Chips by each name; clicking one (or typing in the filter) asks the API for exactly those runs."""
    made = {
        "a": live_server.sdk_run(name="tag-a", tags=["sweep", "lr-1e-3"], group="sweep-1"),
        "b": live_server.sdk_run(name="tag-b", tags=["sweep"], group="sweep-1"),
        "c": live_server.sdk_run(name="tag-c", tags=[HOSTILE], group="solo"),
    }
    for run in made.values():
        run.log({"train/loss": 1.0}, step=1)
        run.finish()

    def shown() -> list[str]:
        return sorted(page.eval_on_selector_all("#runs tbody td.name a", "as => as.map(a => a.textContent)"))

    def api(**params: str) -> list[str]:
        import httpx

        runs = httpx.get(f"{live_server.url}/api/v1/runs", params=params, timeout=10).json()["runs"]
        return sorted(r["name"] for r in runs)

    page.goto(live_server.url + "/")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 3")
    chips = page.eval_on_selector_all("#runs tbody tr:first-child .chip", "bs => bs.map(b => b.textContent)")
    assert chips == ["solo", HOSTILE]  # newest first: c, its group then its tags, as text
    assert page.eval_on_selector_all("#runs img", "n => n.length") == 0

    page.click("#runs tbody tr:last-child .chip[data-tag='sweep']")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 2")
    assert shown() == api(tag="sweep") == ["tag-a", "tag-b"] and "tag=sweep" in page.url
    assert page.input_value("#tag-filter") == "sweep"

    page.fill("#tag-filter", "")
    page.press("#tag-filter", "Enter")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 3")
    page.fill("#group-filter", "solo")
    page.press("#group-filter", "Enter")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert shown() == api(group="solo") == ["tag-c"] and "group=solo" in page.url

    page.goto(live_server.url + "/?tag=lr-1e-3&group=sweep-1")  # the URL alone restores the filter
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert shown() == api(tag="lr-1e-3", group="sweep-1") == ["tag-a"]
    page.screenshot(path=str(live_server.spool.parent / "runs-tags.png"))
    assert page.dialogs == [] and page.errors == []
