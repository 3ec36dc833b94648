"""Bad query parameters answer 422 JSON naming the parameter; unknown things answer 404."""

from __future__ import annotations

import pytest

API = "/api/v1/runs"


@pytest.fixture
def run_id(seed):
    run = seed.run(name="v").start()
    run.log({"loss": [(1, 1.0)]})
    return run.run


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("", {"limit": 0}, "limit"),
        ("", {"limit": 201}, "limit"),
        ("", {"limit": "many"}, "limit"),
        ("", {"status": "sleeping"}, "status"),
        ("", {"cursor": "not-a-cursor"}, "cursor"),
        ("", {"cursor": "W10"}, "cursor"),  # base64 of []
        ("/{run}/metrics", {}, "key"),
        ("/{run}/metrics", {"key": "loss", "max_points": 0}, "max_points"),
        ("/{run}/metrics", {"key": "loss", "max_points": 20_001}, "max_points"),
        ("/{run}/metrics", {"key": "loss", "start": -1}, "start"),
        ("/{run}/metrics", {"key": "loss", "end": "x"}, "end"),
        ("/{run}/metrics", {"key": "loss", "start": 10, "end": 5}, "end"),
        ("/{run}/metrics", {"key": "loss", "segment": -1}, "segment"),
        ("/{run}/events", {"type": "metrics"}, "type.0"),
        ("/{run}/events", {"after": "abc"}, "after"),
        ("/{run}/events", {"limit": 1001}, "limit"),
        ("/{run}/export", {"format": "xml"}, "format"),
    ],
)
def test_bad_params_are_422_naming_the_param(client, run_id, path, params, field):
    res = client.get(API + path.format(run=run_id), params=params)
    assert res.status_code == 422, res.text
    error = res.json()["error"]
    assert error["field"] == field
    assert error["message"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"key": "nope"}, "key"), ({"key": "loss", "segment": 3}, "segment")],
)
def test_unknown_metric_or_segment_is_404(client, run_id, params, field):
    res = client.get(f"{API}/{run_id}/metrics", params=params)
    assert res.status_code == 404
    assert res.json()["error"]["field"] == field


def test_metrics_response_shape(client, run_id):
    body = client.get(f"{API}/{run_id}/metrics", params={"key": "loss"}).json()
    assert body == {
        "run": run_id,
        "key": "loss",
        "version": 2,  # run_started, then the batch with the point
        "level": 0,
        "bucket_width": 1,
        "series": [
            {
                "segment": 0,
                "start_step": 0,
                "step": [1],
                "last_step": [1],
                "min": [1.0],
                "max": [1.0],
                "mean": [1.0],
                "last": [1.0],
                "count": [1],
            }
        ],
    }


@pytest.mark.parametrize(("method", "path"), [
    ("PATCH", "/api/v1/runs/{run}"), ("POST", "/api/v1/runs/{run}/uploads"), ("POST", "/api/v1/ingest"),
    ("PUT", "/api/v1/runs/{run}/alerts/config"), ("POST", "/api/v1/subscriptions"),
])
def test_a_body_that_is_not_utf8_json_is_422_naming_the_body(client, seed, method, path):
    run = seed.run().start().run
    headers = {"Authorization": f"Bearer {seed.token()}", "Content-Type": "application/json"}
    for body in (b"\xff\xfepCY\x0e\x80\nHz", b"\x80pCY\x0e\xef\nHz", b"{\"name\": \"\xc3\"}"):
        res = client.request(method, path.format(run=run), content=body, headers=headers)
        assert res.status_code in (400, 422), res.text  # ingest answers 400 for a batch it cannot read
        assert res.json()["error"]["field"] == "body", res.text
