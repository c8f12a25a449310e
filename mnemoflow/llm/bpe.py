"""OpenAI BPE token ids and counts without ``import bpe_openai`` (which costs ~1 s a process).

``bpe-openai``'s package ``__init__`` builds a model registry that parses every shipped tiktoken
file in Python (cl100k, o200k, voyage3: 0.5-1.3 s), and ``get_encoding`` copies the ranks again;
yet its ``Encoding.encode(text, disallowed_special=())`` is only its Rust extension's
``PyTokenizer.encode(text)`` plus a few checks. :func:`tokenizer` loads that extension,
``bpe_openai._bindings``, straight from its file (finding the package's folder does not execute
the package) and builds the tokenizer (~0.05 s), keeping those checks, so ids and counts are
identical (tests/test_bpe.py). The module is registered under its own name, so a later
``import bpe_openai`` reuses it (a PyO3 extension initializes once a process). When the extension
cannot be loaded or does not know the encoding (gpt2, p50k, ...), the package's ``get_encoding``
is used.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import warnings
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

_BINDINGS = "bpe_openai._bindings"
#: bpe_openai's own limits (``Encoding._encode_plain`` and ``DEFAULT_CHUNK_LIMIT``), kept so a text
#: raises here exactly when it raises there.
MAX_CHARS = 1_000_000
CHUNK_LIMIT = 200_000


def _sanitized(text: str) -> str:
    """``text`` with lone surrogates replaced, as ``Encoding._sanitize_text`` does."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Tokenizer:
    """An encoding's ids and counts; special-token strings are counted as ordinary text."""

    def __init__(self, name: str, backend: Any) -> None:
        self.name = name
        self._backend = backend

    def encode(self, text: str) -> list[int]:
        text = _sanitized(text)
        if not text:
            return []
        if len(text) >= MAX_CHARS:
            raise ValueError("Input too long to encode safely")
        tokens = list(self._backend.encode(text))
        _check_limit(len(tokens))
        return tokens

    def count(self, text: str) -> int:
        text = _sanitized(text)
        if not text:
            return 0
        if len(text) >= MAX_CHARS:
            raise ValueError("Input too long to encode safely")
        return _check_limit(self._backend.count(text))


class _PackageTokenizer(Tokenizer):
    """The fallback: ``bpe_openai.get_encoding(name)``, imported the slow way."""

    def encode(self, text: str) -> list[int]:
        return list(self._backend.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        return len(self.encode(text))


def _check_limit(count: int) -> int:
    if count > CHUNK_LIMIT:
        raise ValueError(f"Input produces {count} tokens which exceeds chunk limit {CHUNK_LIMIT}")
    return count


def _bindings() -> ModuleType | None:
    """``bpe_openai._bindings`` loaded from its file without running ``bpe_openai/__init__``."""
    if _BINDINGS in sys.modules:
        return sys.modules[_BINDINGS]
    try:
        package = importlib.util.find_spec("bpe_openai")  # locates; does not execute
    except (ImportError, ValueError):
        return None
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if not path.is_file():
                continue
            loader = importlib.machinery.ExtensionFileLoader(_BINDINGS, str(path))
            spec = importlib.util.spec_from_file_location(_BINDINGS, path, loader=loader)
            if spec is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[_BINDINGS] = module
            try:
                loader.exec_module(module)
            except Exception:
                sys.modules.pop(_BINDINGS, None)
                return None
            return module
    return None


@lru_cache(maxsize=8)
def tokenizer(name: str = "o200k_base") -> Tokenizer:
    """The named encoding (o200k_base, cl100k_base, ...), built once per process."""
    bindings = _bindings()
    if bindings is not None:
        try:
            return Tokenizer(name, bindings.tokenizer_for_encoding(name))
        except Exception:  # an encoding the extension lacks: the package knows more
            pass
    with warnings.catch_warnings():  # bpe-openai reads its data with a deprecated importlib API
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return _PackageTokenizer(name, bpe_openai.get_encoding(name))
