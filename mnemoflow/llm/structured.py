"""Structured output: the forms of ``response_format`` a request can degrade through, and how to
read an endpoint's refusal of a request (which body field it rejected, whether asking again could
help, whether it is about structured output).

Forms, strongest first: ``json_schema`` (the reply follows the schema), ``json_object`` (a JSON
object; the request carries the schema as ``response_format.schema``, which llama.cpp's servers
turn into a grammar and others ignore), ``none`` (no ``response_format``: the prompt alone asks
for JSON). ``structured_output: auto`` sends the strongest form the endpoint accepts
(:mod:`mnemoflow.llm.gateway`).

Servers refuse a form in different words and statuses: vLLM and proxies answer HTTP 400 or 422
naming it; llama-cpp-python's server answers every failure, its request validation included, with
HTTP 500 and a pydantic message naming the field, e.g. ``1 validation error: {'type':
'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "Input should be 'text' or
'json_object'", ...}``. A request-validation error is deterministic: the same body gets the same
answer, so it is never worth more than one retry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: The forms, strongest first; ``none`` sends no ``response_format``.
FORMS = ("json_schema", "json_object", "none")

#: What an endpoint says when it cannot do a form of structured output (vLLM, llama.cpp, TGI,
#: proxies).
STRUCTURED_WORDS = re.compile(
    r"response_format|json[_ ]?schema|json_object|guided|structured.output|grammar", re.I
)

#: A request-validation error (pydantic's "1 validation error", FastAPI's RequestValidationError).
_VALIDATION = re.compile(r"\bvalidation errors?\b|\bRequestValidationError\b", re.I)

#: The location of a rejected body field: pydantic's ``'loc': ('body', 'a', 'b')`` or FastAPI's
#: JSON ``"loc": ["body", "a", "b"]``.
_LOCATION = re.compile(r"""["']loc["']\s*:\s*[(\[]\s*["']body["']\s*,\s*([^)\]]*)[)\]]""")
_PART = re.compile(r"""["']([^"']+)["']|(\d+)""")


def form_name(response_format: Mapping[str, Any] | None) -> str:
    """The form a ``response_format`` asks for (``none`` without one)."""
    if not response_format:
        return "none"
    return str(response_format.get("type") or "none")


def ladder(response_format: Mapping[str, Any] | None) -> list[dict[str, Any] | None]:
    """``response_format`` and each weaker form after it, ending with ``None``: a json_schema
    becomes a json_object carrying its schema, then nothing; any other form, then nothing."""
    if not response_format:
        return [None]
    steps: list[dict[str, Any] | None] = [dict(response_format)]
    if form_name(response_format) == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        weaker: dict[str, Any] = {"type": "json_object"}
        if isinstance(schema, Mapping):
            weaker["schema"] = dict(schema)
        steps.append(weaker)
    return [*steps, None]


def weakest(forms: list[str]) -> str:
    """The weakest of ``forms`` (what a role ended on when its requests went out in several);
    a form not in :data:`FORMS` ranks above them all."""
    return max(forms, key=lambda f: FORMS.index(f) if f in FORMS else -1, default="none")


def is_validation_error(detail: str) -> bool:
    """Whether an error body is a request-validation error (deterministic: retrying is useless)."""
    return bool(_VALIDATION.search(detail))


def rejected_field(detail: str) -> str | None:
    """The body field a refusal names, dotted (``response_format.type``): the location of a
    validation error, else ``response_format`` when the text names structured output."""
    match = _LOCATION.search(detail)
    if match:
        parts = [a or b for a, b in _PART.findall(match.group(1))]
        if parts:
            return ".".join(parts)
    return "response_format" if STRUCTURED_WORDS.search(detail) else None


def refuses_structured_output(status: int, detail: str) -> bool:
    """Whether an endpoint's refusal (HTTP ``status``, body text ``detail``) says it cannot do the
    request's form of structured output: a 4xx naming it, or a 5xx that is a request-validation
    error naming it (llama-cpp-python's server)."""
    if 400 <= status < 500:
        return bool(STRUCTURED_WORDS.search(detail))
    if status >= 500 and is_validation_error(detail):
        field = rejected_field(detail)
        return field is not None and bool(STRUCTURED_WORDS.search(field))
    return False


def config_key(
    role: str, field: str | None, own_fields: Mapping[str, str | None], extra: Mapping | None
) -> str | None:
    """The config key that sets a rejected body ``field`` of ``role``'s requests: the role's own
    key for the fields the gateway sets (``own_fields``: body field -> key), ``extra_body`` for
    what it carries; ``None`` for the parts no key sets (the messages)."""
    if not field:
        return None
    top = field.split(".", 1)[0]
    if own_fields.get(top):
        return f"models.{role}.{own_fields[top]}"
    if extra and top in extra:
        return f"models.{role}.extra_body.{top}"
    return None
