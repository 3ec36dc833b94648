"""The OpenAPI document builds, names every public route, and has unique, stable operation ids."""

from __future__ import annotations

import warnings
from typing import Any


def test_openapi_lists_the_public_surface(client: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a duplicate operation id is a warning in FastAPI
        doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in (
        "/api/v1/ingest",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/metrics",
        "/api/v1/runs/{run_id}/events",
        "/api/v1/runs/{run_id}/stream",
        "/api/v1/runs/{run_id}/checkpoints",
        "/api/v1/runs/{run_id}/checkpoints/{cid}/download",
        "/api/v1/runs/{run_id}/alerts",
        "/api/v1/subscriptions",
        "/healthz",
    ):
        assert path in paths, path
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))


# What a generated client names its functions (docs/api.md, "Generating a client"): renaming a route
# function renames them, so a change here is a change of the API clients are built from.
OPERATION_IDS = {
    "GET /healthz": "healthz", "GET /readyz": "readyz",
    "POST /api/v1/ingest": "ingest", "GET /api/v1/whoami": "whoami",
    "GET /api/v1/runs": "list_runs", "GET /api/v1/runs/{run_id}": "get_run",
    "PATCH /api/v1/runs/{run_id}": "change_run", "DELETE /api/v1/runs/{run_id}": "delete_run",
    "PUT /api/v1/runs/{run_id}/segments/{segment}/spool": "report_spool",
    "GET /api/v1/tokens": "list_tokens", "DELETE /api/v1/tokens/{token_id}": "revoke_token",
    "GET /api/v1/runs/{run_id}/metrics": "get_metrics", "GET /api/v1/runs/{run_id}/events": "get_events",
    "GET /api/v1/runs/{run_id}/batch": "get_batch",
    "GET /api/v1/runs/{run_id}/commands": "list_commands", "POST /api/v1/runs/{run_id}/commands": "send_command",
    "GET /api/v1/runs/{run_id}/export": "export_run", "GET /api/v1/runs/{run_id}/stream": "stream_run",
    "GET /api/v1/runs/{run_id}/broadcast/edge": "get_broadcast_edge",
    "GET /api/v1/runs/{run_id}/broadcast/pieces/{piece}": "get_broadcast_piece",
    "GET /api/v1/runs/{run_id}/checkpoints": "list_checkpoints",
    "GET /api/v1/runs/{run_id}/checkpoints/{cid}/download": "get_checkpoint_download",
    "HEAD /api/v1/runs/{run_id}/checkpoints/{cid}/download": "head_checkpoint_download",
    "GET /api/v1/runs/{run_id}/checkpoints/{cid}/files": "list_checkpoint_files",
    "GET /api/v1/runs/{run_id}/checkpoints/{cid}/files/{file_path}": "get_checkpoint_file",
    "HEAD /api/v1/runs/{run_id}/checkpoints/{cid}/files/{file_path}": "head_checkpoint_file",
    "GET /api/v1/runs/{run_id}/checkpoints/{cid}/card": "get_checkpoint_card",
    "GET /api/v1/storage": "get_storage_capabilities",
    "POST /api/v1/runs/{run_id}/uploads": "begin_upload",
    "PUT /api/v1/runs/{run_id}/uploads/{upload_id}/files/{index}": "upload_chunk",
    "POST /api/v1/runs/{run_id}/uploads/{upload_id}/complete": "complete_upload",
    "GET /api/v1/runs/{run_id}/revisions": "list_revisions",
    "GET /api/v1/runs/{run_id}/revisions/{rid}/diff": "get_revision_diff",
    "GET /api/v1/runs/{run_id}/manifests": "list_manifests",
    "GET /api/v1/runs/{run_id}/manifests/diff": "get_manifest_diff",
    "GET /api/v1/runs/{run_id}/manifests/{version}": "get_manifest",
    "GET /api/v1/runs/{run_id}/data-mix": "get_data_mix",
    "GET /api/v1/runs/{run_id}/alerts": "get_alerts",
    "GET /api/v1/runs/{run_id}/alerts/config": "get_alert_config",
    "PUT /api/v1/runs/{run_id}/alerts/config": "put_alert_config",
    "GET /api/v1/runs/{run_id}/alerts.atom": "get_run_alerts_feed",
    "GET /api/v1/projects/{project}/alerts.atom": "get_project_alerts_feed",
    "POST /api/v1/subscriptions": "create_subscription",
    "GET /api/v1/subscriptions/confirm": "confirm_subscription",
    "POST /api/v1/subscriptions/unsubscribe": "unsubscribe",
    "GET /api/v1/subscriptions/unsubscribe": "unsubscribe_by_link",
    "GET /api/v1/subscriptions/{subscription_id}": "get_subscription",
    "GET /api/v1/runs/{run_id}/samples/prompts": "get_prompts", "GET /api/v1/runs/{run_id}/samples": "get_samples",
    "GET /api/v1/runs/{run_id}/samples/{sample_id}": "get_sample", "GET /api/v1/runs/{run_id}/evals": "get_evals",
    "GET /api/v1/runs/{run_id}/media/keys": "get_media_keys", "GET /api/v1/runs/{run_id}/media": "get_media",
    "GET /api/v1/runs/{run_id}/media/{media_id}/image": "get_media_image",
    "HEAD /api/v1/runs/{run_id}/blobs/{sha256}": "head_blob", "PUT /api/v1/runs/{run_id}/blobs/{sha256}": "put_blob",
    "GET /api/v1/estimate": "estimate_memory",
    "GET /api/v1/runs/{run_id}/policy": "get_run_policy", "PUT /api/v1/runs/{run_id}/policy": "put_run_policy",
    "GET /api/v1/projects/{project}/policy": "get_project_policy",
    "PUT /api/v1/projects/{project}/policy": "put_project_policy",
    "GET /api/v1/admin/inbox/stats": "get_inbox_stats", "GET /api/v1/admin/inbox": "list_inbox",
    "GET /api/v1/admin/inbox/{inbox_id}": "get_inbox_row", "POST /api/v1/admin/inbox/{inbox_id}/retry": "retry_inbox",
    "GET /api/v1/session": "get_session", "POST /api/v1/session": "sign_in", "DELETE /api/v1/session": "sign_out",
    "POST /api/v1/session/password": "sign_in_with_password", "GET /api/v1/session/providers": "list_providers",
    "GET /api/v1/session/oidc/{provider}/login": "oidc_login",
    "GET /api/v1/session/oidc/{provider}/callback": "oidc_callback",
    "GET /api/v1/projects/{project}/members": "list_members", "PUT /api/v1/projects/{project}/members/{user}": "put_member",
    "DELETE /api/v1/projects/{project}/members/{user}": "delete_member",
    "GET /api/v1/runs/{run_id}/comments": "list_comments", "POST /api/v1/runs/{run_id}/comments": "post_comment",
    "PATCH /api/v1/runs/{run_id}/comments/{comment_id}": "edit_comment",
    "DELETE /api/v1/runs/{run_id}/comments/{comment_id}": "delete_comment",
    "POST /api/v1/runs/{run_id}/comments/{comment_id}/moderation": "moderate_comment",
    "POST /api/v1/runs/{run_id}/comments/{comment_id}/reports": "report_comment",
    "GET /api/v1/runs/{run_id}/comment-reports": "list_reports",
    "GET /api/v1/runs/{run_id}/comments/{comment_id}/versions": "list_versions",
    "PUT /api/v1/runs/{run_id}/comment-settings": "put_comment_settings",
    "GET /api/v1/runs/{run_id}/reports": "list_run_reports", "POST /api/v1/runs/{run_id}/reports": "create_report",
    "GET /api/v1/runs/{run_id}/reports/{number}": "get_report", "PUT /api/v1/runs/{run_id}/reports/{number}": "edit_report",
    "POST /api/v1/runs/{run_id}/reports/{number}/publish": "publish_report",
    "POST /api/v1/runs/{run_id}/reports/{number}/unpublish": "unpublish_report",
    "GET /api/v1/runs/{run_id}/reports/{number}/versions": "list_report_versions",
    "GET /api/v1/runs/{run_id}/reports/{number}/data": "get_report_data",
    "GET /api/v1/runs/{run_id}/reports/{number}/export.html": "export_report",
    "GET /api/v1/runs/{run_id}/report-draft": "get_draft",
    "POST /api/v1/runs/{run_id}/report-preview": "preview_report",
    "GET /badge/runs/{run_id}.svg": "get_run_badge",
    "GET /api/v1/runs/{run_id}/plot.svg": "get_plot_svg", "GET /api/v1/runs/{run_id}/plot.png": "get_plot_png",
}


def test_operation_ids_are_the_route_functions_names_and_stay_so(client: Any) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    ids = {f"{method.upper()} {path}": op["operationId"] for path, item in paths.items() for method, op in item.items()}
    assert ids == OPERATION_IDS


def test_every_schema_has_a_name_of_its_own(client: Any) -> None:
    """Two models of one name in two modules become ``runcast_server__x__schemas__Name`` in the document,
    which generated clients cannot parse (tests/integration/test_generated_client.py, slower, says so too)."""
    names = client.get("/openapi.json").json()["components"]["schemas"]
    assert [n for n in names if "__" in n] == []


def test_every_answer_has_a_schema_under_its_media_type(client: Any) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    bare = [f"{method.upper()} {path} {status} {media}"
            for path, item in paths.items() for method, op in item.items()
            for status, response in op["responses"].items()
            for media, body in response.get("content", {}).items()
            if "schema" not in body and "itemSchema" not in body]  # the live stream: one schema per message
    assert bare == []
    image = paths["/api/v1/runs/{run_id}/plot.png"]["get"]["responses"]["200"]["content"]
    feed = paths["/api/v1/runs/{run_id}/alerts.atom"]["get"]["responses"]["200"]["content"]
    assert image == {"image/png": {"schema": {"type": "string", "format": "binary"}}}
    assert feed == {"application/atom+xml": {"schema": {"type": "string"}}}


def test_the_metrics_event_schema_reserves_the_step_times_key(client: Any) -> None:
    """A client generated from the document (or Schemathesis) never builds a metrics event that logs
    ``_timestamp``: the schema refuses it, as the server does (422 naming ``values._timestamp``)."""
    import jsonschema

    doc = client.get("/openapi.json").json()
    schema = {"$ref": "#/components/schemas/MetricsEvent", "components": doc["components"]}
    validator = jsonschema.Draft202012Validator(schema)
    event = {"v": 1, "type": "metrics", "run": "schema-run-01", "segment": "seg-0001", "seq": 0, "ts": 1.7e9, "step": 3}
    assert validator.is_valid({**event, "values": {"loss": 1.5, "timestamp": 2.0}})
    assert not validator.is_valid({**event, "values": {"_timestamp": 1.7e9}})
    assert not validator.is_valid({**event, "values": {"loss": 1.5, "_timestamp": 1.7e9}})
    assert "_timestamp" in doc["components"]["schemas"]["MetricsEvent"]["properties"]["values"]["description"]
