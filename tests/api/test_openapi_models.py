"""Every JSON route has a response model: /docs shows each answer's schema (issue 11)."""

from __future__ import annotations

from typing import Any


def _untyped(schema: dict[str, Any] | None) -> bool:
    """A schema that says nothing: missing, ``{}``, or an object of free-form properties only."""
    if not schema:
        return True
    if "$ref" in schema:
        return False
    if schema.get("type") == "array":
        return _untyped(schema.get("items"))
    return set(schema) <= {"type", "title", "description", "additionalProperties"} and "properties" not in schema


def test_every_json_answer_has_a_schema(client: Any) -> None:
    doc = client.get("/openapi.json").json()
    untyped = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for code, response in op.get("responses", {}).items():
                if not code.startswith("2") or "application/json" not in response.get("content", {}):
                    continue
                if _untyped(response["content"]["application/json"].get("schema")):
                    untyped.append(f"{method.upper()} {path} {code}")
    assert untyped == []


def test_the_check_sees_free_form_objects() -> None:
    assert _untyped(None) and _untyped({})
    assert _untyped({"type": "object", "additionalProperties": True, "title": "Response"})
    assert _untyped({"type": "object", "additionalProperties": {"type": "string"}})
    assert _untyped({"type": "array", "items": {}})
    assert not _untyped({"$ref": "#/components/schemas/RunList"})
    assert not _untyped({"type": "array", "items": {"$ref": "#/components/schemas/RunSummary"}})
