"""The plan's token model: a prompt's tokens as its endpoint reports them, an embedded text's,
and each call site's expected reply length.

- Prompts: as the endpoint's ledger will count them: the offline model counts the messages'
  words (no chat overhead); every other backend as the gateway counts for context windows
  (:func:`mnemoflow.llm.context.prompt_tokens`: o200k for an OpenAI-compatible endpoint).
- Embeddings: only an OpenAI-compatible endpoint reports tokens; the local embedders none, so
  their ledgers hold 0 and so does the plan. Counted in texts, as the ledger counts them.
- Replies: the mean completion of the same role / task and model in earlier ledgers, else the
  expected reply length of the call site from ``data/reply_tokens.yaml`` (each entry with its
  source), never ``max_tokens``: a reply of the offline model has its own measured length.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from mnemoflow.errors import ConfigError
from mnemoflow.lexical import count_tokens
from mnemoflow.llm.context import count_text, prompt_tokens
from mnemoflow.llm.prefix_dispatch import shared_fraction

#: The shipped table of expected reply lengths per call site.
TABLE = Path(__file__).resolve().parents[2] / "data" / "reply_tokens.yaml"
#: The entry a role's unlisted task falls back to (``<role>/*``).
ANY_TASK = "*"


def sent_tokens(messages: list[dict[str, Any]], backend: str) -> int:
    """A prompt's tokens as the endpoint of ``backend`` reports them in the ledger."""
    if backend == "offline":
        return sum(count_tokens(str(m.get("content") or "")) for m in messages)
    return prompt_tokens(messages, backend)


def text_tokens(text: str, backend: str) -> int:
    """One message's tokens as :func:`sent_tokens` counts them (its chat overhead included)."""
    return sent_tokens([{"role": "user", "content": text}], backend) - (
        0 if backend == "offline" else prompt_tokens([], backend)
    )


def cached_tokens(
    messages: list[dict[str, Any]], tokens: float, backend: str, blocks: set[str]
) -> float:
    """Of a prompt's ``tokens``, those a server's prefix cache is expected to serve: the share an
    unbounded cache would, given ``blocks`` (the job's prompts so far, updated here). None but a
    server's (``openai``) has a cache."""
    if backend != "openai":
        return 0.0
    return tokens * shared_fraction(messages, blocks)


def filler(tokens: float, backend: str) -> str:
    """A stand-in text of about ``tokens`` tokens as ``backend`` counts them."""
    per_word = text_tokens(" ".join(["word"] * 100), backend) / 100
    return " ".join(["word"] * max(1, round(tokens / per_word)))


def embedded_tokens(texts: Iterable[str], backend: str) -> int:
    """Tokens the ledger records for embedding ``texts``: only an OpenAI-compatible endpoint
    reports any."""
    if backend != "openai":
        return 0
    return sum(count_text(t, backend) for t in texts)


@lru_cache(maxsize=1)
def reply_table() -> dict[str, dict[str, Any]]:
    """``role/task`` -> {``model``, ``offline``, ``source``}: expected completion tokens."""
    import yaml

    raw = yaml.safe_load(TABLE.read_text(encoding="utf-8")) or {}
    sites = raw.get("sites")
    if not isinstance(sites, dict):
        raise ConfigError(f"{TABLE}: 'sites' must be a mapping of role/task -> entry")
    for site, entry in sites.items():
        if not isinstance(entry, dict) or not {"model", "offline", "source"} <= set(entry):
            raise ConfigError(f"{TABLE}: sites.{site}: needs model, offline and source")
        for key in ("model", "offline"):
            if not isinstance(entry[key], int | float) or entry[key] < 0:
                raise ConfigError(f"{TABLE}: sites.{site}.{key}: a number of tokens >= 0")
    return sites


def expected_reply(role: str, task: str, backend: str, family: str | None = None) -> float:
    """The call site's expected completion tokens: ``family:role/task`` (a task several families
    share, answered differently), else ``role/task``, else the role's ``*`` entry."""
    sites = reply_table()
    entry = (
        sites.get(f"{family}:{role}/{task}")
        or sites.get(f"{role}/{task}")
        or sites.get(f"{role}/{ANY_TASK}")
    )
    if entry is None:
        raise ConfigError(f"{TABLE}: no entry for {role}/{task} nor {role}/{ANY_TASK}")
    return float(entry["offline" if backend == "offline" else "model"])


def reply_tokens(
    role: str,
    task: str,
    backend: str,
    observed: Mapping[tuple[str, str | None], float] | None = None,
    family: str | None = None,
) -> float:
    """Expected completion tokens of one call: the mean observed in earlier ledgers of the same
    model for the role / task, else the table's (:func:`expected_reply`)."""
    found = (observed or {}).get((role, task))
    return float(found) if found is not None else expected_reply(role, task, backend, family)
