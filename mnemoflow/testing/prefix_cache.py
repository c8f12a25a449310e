"""The test server's bounded prefix cache: what vLLM's automatic prefix caching would serve.

A prompt is a stream of tokens, counted as the test server bills them (:func:`prompt_stream`
has exactly :func:`~mnemoflow.testing.openai_server.prompt_tokens` tokens), cut into blocks of
``block_tokens``; a block is named by a hash chained over every block before it, so two prompts
share a block only when they share the whole prefix up to its end. The cache holds at most
``blocks`` of them in LRU order: a request is served the leading blocks present when it arrives
(never its last token: a server always computes at least one), and its blocks enter the cache
when it completes, the deepest first, so that when a long prompt does not fit, or an old one is
evicted, the tail of the chain goes before its head. This is vLLM's order: a finished request's
blocks go to the back of the free queue, which is evicted from its front, in reverse order (the
last block hashes the most tokens and is the least likely to be shared), per vLLM's design docs,
"Automatic Prefix Caching" (https://docs.vllm.ai/en/latest/design/prefix_caching/), and its v1
``KVCacheManager.free``. An LRU that dropped a chain's head first would lose every later hit on
it (a chain is only usable from its first block).

:class:`IdealCache` is the yardstick: an unbounded cache filled on arrival, which serves each
request every block any earlier request sent; the total it serves for a set of requests does
not depend on their order or concurrency (every distinct block is computed once). Capped at a
bounded cache's ``blocks`` per request (the server's ``bound_cached_tokens``), it is what that
cache could serve at most in any order with any eviction: a block deeper than ``blocks`` in its
chain is never served, since its whole chain up to it would have to be cached; the sum of
``min(served, blocks)`` does not depend on the order either (every block at depth at most
``blocks`` is served each time but its first).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from typing import Any

#: Tokens per block (vLLM's default block size).
BLOCK_TOKENS = 16

#: The words :func:`mnemoflow.lexical.count_tokens` counts (kept in step with it).
_WORD = re.compile(r"[\u4e00-\u9fff]|[a-z0-9]+(?:'[a-z]+)?", re.IGNORECASE)


def content_stream(text: str) -> list[str]:
    """``count_tokens(text)`` tokens, each the word it falls in (a prefix of the words gives a
    prefix of the tokens)."""
    words = _WORD.findall(text or "")
    if not text:
        return []
    n = int(len(words) * 1.3) + 1
    if not words:
        return ["<text>"] * n
    return [words[min(int(i / 1.3), len(words) - 1)] for i in range(n)]


def prompt_stream(messages: list[dict[str, Any]], text_of: Any) -> list[str]:
    """A chat prompt's tokens: per message four of framing (with its role) and its content,
    then three that start the reply (``3 + sum(4 + content tokens)``)."""
    stream: list[str] = []
    for message in messages:
        stream += ["<|start|>", str(message.get("role")), "<|message|>", "\n"]
        stream += content_stream(text_of(message.get("content")))
    return [*stream, "<|start|>", "assistant", "<|message|>"]


def block_chain(tokens: list[str], block_tokens: int = BLOCK_TOKENS) -> list[str]:
    """The chained hashes of the whole blocks of ``tokens`` but its last token (always
    computed), in prompt order."""
    chain, previous = [], b""
    usable = max(len(tokens) - 1, 0)
    for start in range(0, usable - usable % block_tokens, block_tokens):
        digest = hashlib.blake2b(previous, digest_size=16)
        digest.update("\x1f".join(tokens[start : start + block_tokens]).encode("utf-8"))
        previous = digest.digest()
        chain.append(previous.hex())
    return chain


class PrefixCache:
    """An LRU of at most ``blocks`` chained block hashes."""

    def __init__(self, blocks: int, block_tokens: int = BLOCK_TOKENS):
        if blocks < 1 or block_tokens < 1:
            raise ValueError(f"prefix cache: blocks and block_tokens must be >= 1, got {blocks}")
        self.capacity = blocks
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[str, None] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, chain: list[str]) -> int:
        """Leading blocks of ``chain`` present (a chain is only usable from its start)."""
        return _leading(chain, self._blocks)

    def fill(self, chain: list[str]) -> None:
        """A request with ``chain`` completed: its blocks become the most recently used, its
        first block the most recent of all; the least recently used go beyond ``capacity``."""
        for block in reversed(chain):
            self._blocks[block] = None
            self._blocks.move_to_end(block)
            if len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)


class IdealCache:
    """Unbounded, filled on arrival: the most any prefix cache can serve the same requests."""

    def __init__(self) -> None:
        self._blocks: set[str] = set()

    def arrive(self, chain: list[str]) -> int:
        """Leading blocks of ``chain`` sent before; then ``chain`` is sent."""
        n = _leading(chain, self._blocks)
        self._blocks.update(chain)
        return n


def _leading(chain: list[str], present: Any) -> int:
    n = 0
    for block in chain:
        if block not in present:
            break
        n += 1
    return n
