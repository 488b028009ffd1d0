"""The HTTP API's reference, read from the app's own OpenAPI schema.

`operations` and `schemas` turn the schema into plain records that two renderers share: the
`/docs` page here (a Jinja2 template, so every text from the schema is escaped, with no
script, style or font from elsewhere: FastAPI's own `/docs` loads Swagger UI from a CDN) and
the Markdown of docs/reference/ (service/cli/docs_reference.py). A type is a list of pieces, each
naming the schema it links to, if any, so each renderer makes its own links.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from service.web.routes import SECURITY_HEADERS
from service.web.templating import render

METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
# The JSON Schema keywords shown beside a field's type, in this order.
_CONSTRAINTS = (
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
)

Schema = dict[str, Any]


@dataclass(frozen=True)
class Piece:
    """Part of a type's text; `ref` names the schema it links to."""

    text: str
    ref: str | None = None


@dataclass(frozen=True)
class Field:
    name: str
    type: list[Piece]
    required: bool
    description: str
    notes: str


@dataclass(frozen=True)
class SchemaDoc:
    name: str
    description: str
    type: list[Piece]
    fields: list[Field]


@dataclass(frozen=True)
class Body:
    media_type: str
    type: list[Piece]


@dataclass(frozen=True)
class Response:
    status: str
    description: str
    bodies: list[Body]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    description: str
    parameters: list[Field]
    body_required: bool
    bodies: list[Body]
    responses: list[Response]

    @property
    def anchor(self) -> str:
        return anchor(f"{self.method}-{self.path}")


def anchor(text: str) -> str:
    """An HTML id from `text`: lower-case letters, digits and single hyphens."""
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in out.split("-") if part)


def schema_anchor(name: str) -> str:
    return anchor(f"schema-{name}")


def ref_name(ref: str) -> str:
    """`#/components/schemas/JobView` (OpenAPI) or `#/$defs/Record` (JSON Schema): the name."""
    return ref.rsplit("/", 1)[-1]


def _joined(parts: list[list[Piece]], separator: str) -> list[Piece]:
    out: list[Piece] = []
    for i, part in enumerate(parts):
        if i:
            out.append(Piece(separator))
        out.extend(part)
    return out


def type_pieces(schema: Schema) -> list[Piece]:
    """A readable type: `list[JobView]`, `string | null`, `"passed" | "failed"`."""
    if "$ref" in schema:
        name = ref_name(schema["$ref"])
        return [Piece(name, name)]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _joined([type_pieces(s) for s in schema[key]], " | ")
    if "allOf" in schema:
        return _joined([type_pieces(s) for s in schema["allOf"]], " & ")
    if "const" in schema:
        return [Piece(json.dumps(schema["const"]))]
    if "enum" in schema:
        return [Piece(" | ".join(json.dumps(value) for value in schema["enum"]))]
    kind = schema.get("type")
    if isinstance(kind, list):
        return _joined([type_pieces({**schema, "type": k}) for k in kind], " | ")
    if kind == "array":
        items = schema.get("items")
        return [Piece("list["), *(type_pieces(items) if items else [Piece("any")]), Piece("]")]
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            return [Piece("dict[string, "), *type_pieces(values), Piece("]")]
        return [Piece("object")]
    if kind is None:
        return [Piece("any")]
    return [Piece(f"{kind} ({schema['format']})" if "format" in schema else str(kind))]


def notes(schema: Schema) -> str:
    """The default and the constraints of a field, as `default 1; minimum 1`."""
    found = []
    if "default" in schema:
        found.append(f"default {json.dumps(schema['default'], sort_keys=True)}")
    found += [f"{key} {json.dumps(schema[key])}" for key in _CONSTRAINTS if key in schema]
    return "; ".join(found)


def _fields(schema: Schema) -> list[Field]:
    required = set(schema.get("required", []))
    return [
        Field(
            name=name,
            type=type_pieces(prop),
            required=name in required,
            description=str(prop.get("description", "")),
            notes=notes(prop),
        )
        for name, prop in schema.get("properties", {}).items()
    ]


def schemas(definitions: dict[str, Schema]) -> list[SchemaDoc]:
    """Every named schema, sorted by name, its properties in their declared order."""
    return [
        SchemaDoc(
            name=name,
            description=str(schema.get("description", "")),
            type=type_pieces({k: v for k, v in schema.items() if k != "properties"}),
            fields=_fields(schema),
        )
        for name, schema in sorted(definitions.items())
    ]


def _parameter(parameter: Schema) -> Field:
    schema = parameter.get("schema", {})
    return Field(
        name=f"{parameter['name']} ({parameter['in']})",
        type=type_pieces(schema),
        required=bool(parameter.get("required", False)),
        description=str(parameter.get("description", schema.get("description", ""))),
        notes=notes(schema),
    )


def _bodies(content: dict[str, Schema]) -> list[Body]:
    return [
        Body(media_type, type_pieces(media.get("schema", {})))
        for media_type, media in sorted(content.items())
    ]


def _operation(method: str, path: str, op: Schema) -> Operation:
    body = op.get("requestBody", {})
    return Operation(
        method=method.upper(),
        path=path,
        summary=str(op.get("summary", "")),
        description=str(op.get("description", "")),
        parameters=[_parameter(p) for p in op.get("parameters", [])],
        body_required=bool(body.get("required", False)),
        bodies=_bodies(body.get("content", {})),
        responses=[
            Response(status, str(r.get("description", "")), _bodies(r.get("content", {})))
            for status, r in sorted(op.get("responses", {}).items())
        ],
    )


def operations(openapi: Schema) -> list[Operation]:
    """Every operation, sorted by path and then by method as METHODS lists them."""
    return [
        _operation(method, path, item[method])
        for path, item in sorted(openapi.get("paths", {}).items())
        for method in METHODS
        if method in item
    ]


def component_schemas(openapi: Schema) -> dict[str, Schema]:
    found: dict[str, Schema] = openapi.get("components", {}).get("schemas", {})
    return found


router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """The API's reference page, from the schema `/openapi.json` serves; no token needed,
    as the schema itself needs none."""
    openapi = request.app.openapi()
    page = render(
        "api_docs.html",
        info=openapi.get("info", {}),
        operations=operations(openapi),
        schemas=schemas(component_schemas(openapi)),
        schema_anchor=schema_anchor,
        who=None,
        refresh_s=None,
    )
    return HTMLResponse(page, headers=SECURITY_HEADERS)
