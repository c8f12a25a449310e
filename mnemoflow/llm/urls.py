"""An endpoint's address, checked when the config is read and shown by its host.

Every ``base_url`` (a role's ``models.<role>.base_url``, an external endpoint's
``endpoints.NAME.base_url``) is checked by :func:`check_base_url` before any job: a value that is
no http(s) address would otherwise pass the dry run and fail in the first job that calls it.
What a URL may carry besides its address (credentials) is checked beside it, in one place.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from mnemoflow.errors import ConfigError

#: The schemes a model server is reached by.
SCHEMES = ("http", "https")


def check_base_url(url: Any, where: str) -> None:
    """``url`` is ``http(s)://HOST[:PORT][/PATH]``: else one line naming ``where`` (the key path,
    e.g. ``config models.judge.base_url``) and the value."""
    if not isinstance(url, str):
        raise ConfigError(f"{where}: an http(s) address, got {url!r}")
    text = url.strip()
    if not text or any(c.isspace() for c in text):
        raise ConfigError(f"{where}: an http(s) address without spaces, got {url!r}")
    parts = urlsplit(text)
    if "://" not in text:
        raise ConfigError(
            f"{where}: an http(s) address (no scheme), got {url!r}; e.g. http://{text}"
        )
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigError(f"{where}: an http(s) address, got scheme {parts.scheme!r} in {url!r}")
    try:
        parts.port  # noqa: B018  (raises on a port that is no number or out of range)
    except ValueError:
        raise ConfigError(f"{where}: the port of {url!r} is not a number 0-65535") from None
    if not parts.hostname:
        raise ConfigError(f"{where}: an http(s) address with a host, got {url!r}")


def url_host(url: str | None) -> str:
    """``host[:port]`` of ``url`` (no user info, path or query), what the plan and summary.md
    show; "" for no URL."""
    if not url:
        return ""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port else host
