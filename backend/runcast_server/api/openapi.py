"""The app's OpenAPI document: FastAPI's, made to state what the server does.

* the models of bodies FastAPI does not see (``api.documented``) are in its components;
* a parameter's schema has no ``null``: a parameter left out is its absence (FastAPI writes
  an optional one as ``anyOf [..., null]``, which a client could only send as the text "null");
* each operation names its real use of the bearer token (required on writes, optional on
  reads, where a token only widens what is visible);
* every error response is JSON of the error schema (FastAPI would give a text/plain or file
  route's errors that route's media type);
* every other media type has a schema: text, or bytes (client generators type the answer by it);
* operation ids are the route functions' names (``operation_id``), and unique.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from runcast_server.api import DOCUMENTED_REQUESTS, DOCUMENTED_RESPONSES
from runcast_server.api.deps import CREDENTIALS_REQUIRED, admin, bearer_token
from runcast_server.api.documented import components

_NULL = {"type": "null"}
_TEXT = {"type": "string"}
_BYTES = {"type": "string", "format": "binary"}


def operation_id(route: APIRoute) -> str:
    """An operation's id (``generate_unique_id_function``): its route function's name, such as
    ``list_runs``, so a client generated from the document names its functions as the code does. One
    function serving two operations (a GET and its HEAD) names them itself (``operation_id=``)."""
    return route.name


def is_text(media_type: str) -> bool:
    """Whether an answer of this media type is text: ``text/*``, XML (Atom, SVG), JSON Lines."""
    kind = media_type.split(";")[0].strip()
    return kind.startswith("text/") or kind.endswith(("+xml", "/xml")) or kind == "application/x-ndjson"


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The document of ``app`` (built once, then cached on it)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes, description=app.description)
    schemas = schema["components"]["schemas"]
    documented = {**components(DOCUMENTED_REQUESTS, "validation"), **components(DOCUMENTED_RESPONSES, "serialization")}
    for name, body in documented.items():
        if schemas.setdefault(name, body) != body:
            raise RuntimeError(f"two schemas named {name} in the OpenAPI document")
    error_schema = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    ids: set[str] = set()
    for item in schema["paths"].values():
        for operation in item.values():
            if operation["operationId"] in ids:
                raise RuntimeError(f"two operations with the id {operation['operationId']}")
            ids.add(operation["operationId"])
            for parameter in operation.get("parameters", []):
                _drop_null(parameter["schema"])
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status.isdigit() and int(status) >= 400 and "Readiness" not in str(content):
                    response["content"] = error_schema
                    continue
                for media_type, body in content.items():
                    if "schema" not in body and "itemSchema" not in body:  # a stream's items have theirs
                        body["schema"] = dict(_TEXT if is_text(media_type) else _BYTES)
    for route in iter_route_contexts(app.routes):  # included routers flattened
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        calls = _calls(route.dependant)
        if admin in calls or any(dep in calls for dep in CREDENTIALS_REQUIRED):
            security: list[dict[str, list[str]]] = [{"bearer": []}]
        elif bearer_token in calls:
            security = [{}, {"bearer": []}]
        else:
            continue
        for method in route.methods or ():  # an APIRoute always has its methods
            operation = schema["paths"].get(route.path_format, {}).get(method.lower())
            if operation is not None:
                operation["security"] = security
    app.openapi_schema = schema
    return schema


def _drop_null(schema: dict[str, Any]) -> None:
    """``anyOf [X, null]`` becomes X, in place (annotations such as ``description`` kept)."""
    branches = schema.get("anyOf")
    if not branches or _NULL not in branches:
        return
    rest = [b for b in branches if b != _NULL]
    del schema["anyOf"]
    if len(rest) == 1:
        schema.update(rest[0])
    else:
        schema["anyOf"] = rest


def _calls(dependant: Dependant) -> set[Any]:
    """Every dependency callable of a route, at any depth."""
    out: set[Any] = set()
    for sub in dependant.dependencies:
        out.add(sub.call)
        out |= _calls(sub)
    return out
