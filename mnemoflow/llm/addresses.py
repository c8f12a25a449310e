"""Endpoint addresses as the run records them: no credential in a URL, no URL path in a file.

A ``base_url`` is written to many places: the rules' params (which Snakemake stores in
``.snakemake/metadata``), the endpoint-limit resource names, the ledgers, the report, the logs.
So a credential never goes in a ``base_url`` (:func:`refuse_credentials`: user info and every
query parameter but Azure's ``api-version`` are refused at parse time), and every address that is
written is the :func:`redact` form ``scheme://host:port/redacted-HASH``: a path can hold a token
too (``https://host/tok_abc123/v1``), so only its hash is kept. A secret goes in the environment
instead: ``api_key_env`` (the key), ``headers_env`` (header name -> variable) or ``base_url_env``
(the whole URL); only the process that makes the call reads them.

The workflow passes the redacted bindings (:func:`public_bindings`) to every job; the job finds
each real address again in the config by its redacted form (:func:`real_addresses`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mnemoflow.errors import ConfigError

#: The one query parameter a ``base_url`` may carry (Azure OpenAI needs it; it is no secret).
ALLOWED_QUERY = frozenset({"api-version"})

#: Symbolic ``base_url`` of a role whose URL is in the environment variable NAME (``base_url_env``).
ENV_SCHEME = "env://"

#: How a role or endpoint passes a secret instead (the refusals' advice).
INSTEAD = (
    "pass the key with api_key_env, a header with headers_env (header name -> env var) "
    "or the whole URL with base_url_env (an env var)"
)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDACTED = re.compile(r"/redacted-[0-9a-f]{8}")
#: An HTTP header name (RFC 9110 token) and an environment variable name.
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def refuse_credentials(url: Any, where: str) -> None:
    """Refuse a ``base_url`` that carries a credential, in one line naming ``where``: user info
    (``user:pass@``) or any query parameter but ``api-version``. The message never quotes the
    URL (its console line is kept in Snakemake's log)."""
    if not isinstance(url, str):
        return
    parts = urlsplit(url.strip())
    found = None
    if "@" in parts.netloc:
        found = "user info (user:password@)"
    else:
        names = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
        if any(name.lower() not in ALLOWED_QUERY for name in names) or (parts.query and not names):
            found = "a query parameter other than api-version"
    if found:
        raise ConfigError(
            f"{where}: holds {found}, which would be written with every result; {INSTEAD}"
        )


def check_headers_env(value: Any, where: str) -> dict[str, str] | None:
    """``headers_env``: a mapping of HTTP header names to environment variable names."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"{where}: a mapping of header name -> env var name, got {value!r}")
    for header, variable in value.items():
        if not isinstance(header, str) or not _HEADER.fullmatch(header):
            raise ConfigError(f"{where}: {header!r} is not an HTTP header name")
        if not isinstance(variable, str) or not _VARIABLE.fullmatch(variable):
            raise ConfigError(
                f"{where}.{header}: the NAME of an environment variable, got {variable!r}"
            )
    return dict(value)


def check_variable(value: Any, where: str) -> None:
    """``base_url_env`` / ``api_key_env``: the name of an environment variable."""
    if value is not None and (not isinstance(value, str) or not _VARIABLE.fullmatch(value)):
        raise ConfigError(f"{where}: the NAME of an environment variable, got {value!r}")


def env_url(variable: str) -> str:
    """The symbolic ``base_url`` of a role whose URL is in ``variable``."""
    return f"{ENV_SCHEME}{variable}"


def redact(url: str | None) -> str | None:
    """``url`` as it may be written: ``scheme://host:port`` plus ``/redacted-HASH``, the first 8
    hex digits of the SHA-256 of everything after the host (none for an empty path). A symbolic
    address (``endpoint://NAME``, ``env://NAME``) and an already redacted one stay as they are.

    ``https://h.example/tok_abc/v1?api-version=1`` -> ``https://h.example:443/redacted-5b1c...``.
    """
    if url is None:
        return None
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme.lower() not in _DEFAULT_PORTS:  # symbolic, or no URL at all
        plain = "://" in text and not _secretive(text.split("://", 1)[1])
        if plain or re.fullmatch(r"unparsed" + _REDACTED.pattern, text):
            return text
        return f"unparsed/redacted-{_digest(text)}"
    try:
        port = parts.port or _DEFAULT_PORTS[parts.scheme.lower()]
    except ValueError:
        return f"unparsed/redacted-{_digest(text)}"
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    root = f"{parts.scheme.lower()}://{host}:{port}"
    rest = text.split("://", 1)[1][len(parts.netloc) :].rstrip("/")
    if not rest or ("@" not in parts.netloc and _REDACTED.fullmatch(rest)):
        return root + rest
    return f"{root}/redacted-{_digest(rest)}"


def _secretive(name: str) -> bool:
    """Whether the part after a symbolic scheme could be anything but a plain name."""
    return not re.fullmatch(r"[A-Za-z0-9_.-]+", name)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def is_redacted(url: str | None) -> bool:
    return bool(url) and _REDACTED.search(url or "") is not None and redact(url) == url


def public_bindings(models: Mapping[str, Any]) -> dict[str, Any]:
    """Role bindings as params may carry them: every ``base_url`` redacted (env var names stay)."""
    return {
        role: {**raw, "base_url": redact(raw["base_url"])}
        if isinstance(raw, Mapping) and isinstance(raw.get("base_url"), str)
        else raw
        for role, raw in models.items()
    }


def redacted_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with the ``base_url`` of every role, endpoint and panel judge redacted (the
    report's copy)."""
    out = dict(config)
    for section in ("models", "endpoints"):
        if isinstance(config.get(section), Mapping):
            out[section] = public_bindings(config[section])
    judge = config.get("judge")
    if isinstance(judge, Mapping) and isinstance(judge.get("panel"), list):
        out["judge"] = {**judge, "panel": [_public_entry(entry) for entry in judge["panel"]]}
    return out


def _public_entry(entry: Any) -> Any:
    """A ``judge.panel`` entry with its model's ``base_url`` redacted."""
    if isinstance(entry, Mapping) and isinstance(entry.get("model"), Mapping):
        return {**entry, "model": public_bindings({"judge": entry["model"]})["judge"]}
    return entry


def real_addresses(bindings: Mapping[str, Any]) -> dict[str, str]:
    """Redacted form -> real ``base_url`` of every bound role (``bind_endpoints``' result): how a
    job finds the address its params name only by its redacted form."""
    found: dict[str, str] = {}
    for raw in bindings.values():
        url = raw.get("base_url") if isinstance(raw, Mapping) else None
        if isinstance(url, str) and urlsplit(url.strip()).scheme.lower() in _DEFAULT_PORTS:
            found[redact(url)] = url.strip()
    return found


def secrets_in(url: str | None, headers: Mapping[str, str] = ()) -> list[str]:
    """The strings an error message must never show: the URL, its user info, its path and query
    (each path segment long enough to be a token too), and the header values. The host and port
    stay: they say which server failed."""
    found = [value for value in dict(headers).values() if value]
    if url:
        parts = urlsplit(url)
        found += [url, url.rstrip("/"), parts.path, parts.query]
        found += [segment for segment in parts.path.split("/") if len(segment) >= 6]
        if "@" in parts.netloc:
            found.append(parts.netloc.rsplit("@", 1)[0])
    return sorted({s for s in found if s and s not in ("/",)}, key=len, reverse=True)
