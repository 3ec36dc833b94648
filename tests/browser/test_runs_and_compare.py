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
        """() => { const gd = document.getElementById('chart');
             return gd.data && gd.data.filter(t => t.meta && t.meta.role === 'smooth').length === 2; }""",
        timeout=20000,
    )
    names = page.evaluate(
        "() => document.getElementById('chart').data.filter(t => t.meta && t.meta.role === 'smooth').map(t => t.name)"
    )
    assert names == ["lr-1e-3 (demo)", "lr-3e-4 (demo)"]
    assert page.eval_on_selector_all("#legend a", "as => as.map(a => a.textContent)") == names

    # Aligned by tokens: each run's steps map through its own tokens_seen.
    page.goto(f"{live_server.url}/compare?runs={a.id},{b.id}&key=train/loss&x=tokens")
    page.wait_for_function(
        """() => { const gd = document.getElementById('chart');
             const raw = gd.data ? gd.data.filter(t => t.meta && t.meta.role === 'raw') : [];
             return raw.length === 2 && raw[0].x[raw[0].x.length - 1] === 10000 && raw[1].x[raw[1].x.length - 1] === 20000; }""",
        timeout=20000,
    )
    assert "x=tokens" in page.url
    assert page.errors == []
