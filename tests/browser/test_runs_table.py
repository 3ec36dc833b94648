"""The runs page as a table: choose columns, sort, filter by value, group, select runs to compare;
config keys and values from a trainer are shown as text."""

from __future__ import annotations

import os
from pathlib import Path

HOSTILE_KEY = "<img src=x onerror=alert(1)>"
HOSTILE_VALUE = "<script>alert(2)</script>"
ROWS = "#runs tbody tr[data-id]"


def names(page) -> list[str]:
    return page.eval_on_selector_all(f"{ROWS} td.name a", "as => as.map(a => a.textContent)")


def test_choose_sort_filter_group_and_compare(live_server, page):
    made = {}
    for name, lr, opt, group, loss in [("a", 1e-3, "adam", "g1", 2.0), ("b", 3e-4, "sgd", "g1", 3.0),
                                       ("c", 3e-3, "adam", "g2", 1.0)]:
        run = live_server.sdk_run(name=name, group=group, config={"lr": lr, "optimizer": opt, HOSTILE_KEY: HOSTILE_VALUE})
        run.log({"train/loss": loss}, step=5)
        made[name] = run
    for run in made.values():
        assert run.flush(timeout=20)

    page.goto(live_server.url + "/")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 3")
    page.click("#columns summary")
    for column in ("config.lr", "metric.train/loss", f"config.{HOSTILE_KEY}"):
        page.check(f"#column-list input[value='{column}']")
        page.wait_for_selector(f"#runs th[data-sort='{column}']")
    assert "col=config.lr" in page.url
    headers = page.eval_on_selector_all("#runs thead th.col", "ths => ths.map(t => t.textContent)")
    assert headers == ["config.lr", "metric.train/loss", f"config.{HOSTILE_KEY}"]
    page.wait_for_function(f"document.querySelectorAll('{ROWS} td.col').length === 9")
    cells = page.eval_on_selector_all(f"{ROWS}:first-child td.col .cell-value", "cs => cs.map(c => c.textContent)")
    assert cells == ["0.003", "1", HOSTILE_VALUE]  # newest first (c), as text
    assert page.eval_on_selector_all("#runs img, #runs script", "n => n.length") == 0

    page.click("#runs th[data-sort='config.lr'] button")  # largest first, by the server
    page.wait_for_function("document.querySelector(\"th[data-sort='config.lr']\").getAttribute('aria-sort') === 'descending'")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 3")
    assert names(page) == ["c", "a", "b"] and "sort=config.lr" in page.url
    page.click("#runs th[data-sort='config.lr'] button")
    page.wait_for_function("document.querySelector(\"th[data-sort='config.lr']\").getAttribute('aria-sort') === 'ascending'")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 3 && "
                           f"document.querySelector('{ROWS} td.name a').textContent === 'b'")
    assert names(page) == ["b", "a", "c"]

    page.select_option("#where-column", "config.optimizer")
    page.select_option("#where-op", "eq")
    page.fill("#where-value", "adam")
    page.click("#where button[type=submit]")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 2")
    assert names(page) == ["a", "c"] and "where=" in page.url
    page.select_option("#where-column", "metric.train/loss")
    page.select_option("#where-op", "lt")
    page.fill("#where-value", "1.5")
    page.click("#where button[type=submit]")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 1")
    assert names(page) == ["c"]
    page.click("#conditions button:last-child")  # remove the loss condition
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === 2")

    page.check("#grouped")
    page.wait_for_function("document.querySelectorAll('#runs tr.group-row').length === 2")
    groups = page.eval_on_selector_all("#runs tr.group-row .group-name", "ts => ts.map(t => t.textContent)")
    assert groups == ["g1 1 run", "g2 1 run"]
    assert "grouped=1" in page.url
    page.goto(page.url.replace("where=", "nowhere="))  # the URL alone restores columns, sort and grouping
    page.wait_for_function("document.querySelectorAll('#runs tr.group-row').length === 2 && "
                           f"document.querySelectorAll('{ROWS}').length === 3")
    aggregate = page.eval_on_selector("#runs tr.group-row[data-group='g1'] td.aggregate", "td => td.textContent")
    assert aggregate.startswith("mean 0.00065") and "0.0003 – 0.001" in aggregate
    if os.environ.get("RUNCAST_SCREENSHOT"):
        page.screenshot(path=str(Path(os.environ["RUNCAST_SCREENSHOT"]) / "runs-table.png"), full_page=True)

    for name in ("a", "c"):
        page.check(f"{ROWS}[data-id='{made[name].id}'] td.name input")
    page.click("#compare")
    page.wait_for_url("**/compare?**")
    assert f"runs={made['a'].id},{made['c'].id}" in page.url and "train/loss" in page.url
    page.wait_for_function("document.querySelectorAll('#picked li a').length === 2")
    assert page.eval_on_selector_all("#picked li a", "as => as.map(a => a.textContent)")[0].startswith("a")
    assert page.dialogs == [] and page.errors == []
