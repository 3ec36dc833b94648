"""Models the OpenAPI document names where FastAPI does not see them: bodies a route reads or
writes itself (the ingest batch, a policy change, an upload's manifest, the live stream's
messages). A route refers to one with ``ref(model)``, in ``json_body`` for a request; the
document adds every such model to ``components/schemas`` (``components``, api/openapi.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

REF_TEMPLATE: Final = "#/components/schemas/{model}"


def ref(model: type[BaseModel]) -> dict[str, str]:
    """A ``$ref`` to ``model``'s schema in the document's components."""
    return {"$ref": REF_TEMPLATE.format(model=model.__name__)}


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` declaring the required JSON body of a route that checks it itself."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class _KeyPatterns(GenerateJsonSchema):
    """pydantic's schemas, but a dict's key pattern is in ``propertyNames``, which every key must
    match, not in ``patternProperties``, which leaves a key that does not match it free."""

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        json_schema = super().dict_schema(schema)
        patterns = json_schema.pop("patternProperties", None)
        if patterns:
            [(pattern, values)] = patterns.items()
            json_schema["additionalProperties"] = values
            json_schema.setdefault("propertyNames", {})["pattern"] = pattern
        return json_schema


def components(models: Iterable[type[BaseModel]], mode: JsonSchemaMode) -> dict[str, Any]:
    """The component schemas of ``models`` and of every model they use, by name."""
    _, schema = models_json_schema([(model, mode) for model in models], ref_template=REF_TEMPLATE,
                                   schema_generator=_KeyPatterns)
    defs: dict[str, Any] = schema.get("$defs", {})
    return defs
