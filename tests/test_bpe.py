"""mnemoflow.llm.bpe: the Rust tokenizer loaded without ``import bpe_openai`` counts exactly as
``bpe_openai.get_encoding(name).encode(text, disallowed_special=())`` did, ids and all."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import warnings

import pytest

from mnemoflow.llm import bpe
from mnemoflow.llm.context import count_text
from mnemoflow.memory.tokens import count_tokens, encode
from tests.shared_data import REPO

ENCODINGS = ["o200k_base", "cl100k_base"]

SPECIALS = [
    "<|endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
]

FIXED = [
    "",
    " ",
    "hello",
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Héllo wörld, ça va? Ñandú. Straße. naïve café résumé",
    "I'm, you're, they've, he'd, she'll, it's, WE'RE, DON'T",
    "Emoji: 😀😃😄 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇵🇹 ✨🔥",
    "我最喜欢的颜色是蓝绿色。我住在里斯本，养了一只狗。",
    "日本語のテキスト、カタカナとひらがな。한국어 텍스트입니다.",
    "Русский текст, ελληνικά, עברית, العربية, हिन्दी, ไทย",
    "   leading and trailing spaces   ",
    "tabs\tand\t\tmore\t\t\ttabs",
    "lines\n\n\nand\r\n\r\ncrlf\r\r\n  \n\t\n",
    " " * 257,
    "\n" * 100,
    "a" * 5000,
    "1234567890 3.14159 -42 1e10 0x1F 2023/05/10 (Wed) 09:00 1,000,000.00",
    "9" * 301,
    "<|endoftext|>",
    "before<|endoftext|>after <|endofprompt|> <|fim_prefix|>x<|fim_middle|>y<|fim_suffix|>",
    "<|endoftext|>" * 50,
    "<|im_start|>user\nhi<|im_end|>",
    '{"role": "user", "content": "What did I say about \\"teal\\"?"}',
    "def f(x):\n    return x ** 2  # comment\n\nclass A:\n    pass\n",
    "https://example.com/path?query=1&b=2#frag user@example.com",
    "lone surrogate \ud800 here and \udfff there",
    "\x00\x01\x02 control \x7f chars \u200b zero width \ufeff bom",
    "combining: e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937",
    "ALLCAPS words AND MiXeD CaSe wordsLikeThis and snake_case_names",
    "!!!??? ... --- *** ///  \\\\ @@@ ### $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
]


def _random_texts(count: int, seed: int = 20261126) -> list[str]:
    """Random mixes of ASCII words, punctuation, digits, whitespace, emoji, CJK and specials."""
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0x1F300, 0x1FAFF), (0x2000, 0x206F)]  # fmt: skip
    words = ["the", "memory", "The", "I'm", "don't", "user", "assistant", "2023", "teal"]
    pieces = [" ", "  ", "\n", "\n\n", "\t", "\r\n", *SPECIALS]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 60)):
            kind = rng.random()
            if kind < 0.4:
                parts.append(rng.choice(words))
            elif kind < 0.6:
                parts.append(rng.choice(pieces))
            elif kind < 0.7:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            else:
                low, high = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 8))))
        texts.append("".join(parts))
    return texts


def _long_text() -> str:
    """~2,000 words of varied prose, repeated sentences with different numbers and names."""
    rng = random.Random(7)
    names = ["Caroline", "Melanie", "José", "李雷", "Zoë"]
    sentences = [
        f"On {rng.randint(1, 28)} May {rng.randint(2019, 2024)}, {rng.choice(names)} said: "
        f'"I\'d like {rng.randint(2, 99)} more — really!" 😊\n'
        for _ in range(160)
    ]
    return "".join(sentences)


CORPUS = FIXED + _random_texts(400) + [_long_text()]


@pytest.fixture(scope="module")
def package_encodings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return {name: bpe_openai.get_encoding(name) for name in ENCODINGS}


def test_the_fast_path_is_the_rust_extension_not_the_package():
    assert type(bpe.tokenizer("o200k_base")) is bpe.Tokenizer
    assert type(bpe.tokenizer("cl100k_base")) is bpe.Tokenizer


@pytest.mark.parametrize("name", ENCODINGS)
def test_ids_and_counts_are_identical_to_bpe_openai(name, package_encodings):
    fast = bpe.tokenizer(name)
    old = package_encodings[name]
    for text in CORPUS:
        expected = old.encode(text, disallowed_special=())
        assert fast.encode(text) == expected, text
        assert fast.count(text) == len(expected), text
        assert encode(text, name) == expected, text
        assert count_tokens(text, name) == len(expected), text
        if name == "o200k_base":
            assert count_text(text, "openai") == len(expected), text


def test_special_token_strings_are_ordinary_text():
    assert encode("<|endoftext|>") == [27, 91, 419, 1440, 919, 91, 29]
    assert 199_999 not in encode("a <|endoftext|> b <|endofprompt|>")


@pytest.mark.parametrize(
    "text",
    ["x" * bpe.MAX_CHARS, " a" * (bpe.CHUNK_LIMIT + 1)],
    ids=["too-many-characters", "too-many-tokens"],
)
def test_texts_the_package_refuses_are_refused_alike(text, package_encodings):
    with pytest.raises(ValueError):
        package_encodings["o200k_base"].encode(text, disallowed_special=())
    with pytest.raises(ValueError):
        bpe.tokenizer("o200k_base").encode(text)
    with pytest.raises(ValueError):
        bpe.tokenizer("o200k_base").count(text)


def test_the_fallback_is_the_package(monkeypatch, package_encodings):
    monkeypatch.setattr(bpe, "_bindings", lambda: None)
    bpe.tokenizer.cache_clear()
    try:
        slow = bpe.tokenizer("o200k_base")
        assert type(slow) is bpe._PackageTokenizer
        for text in FIXED:
            assert slow.encode(text) == package_encodings["o200k_base"].encode(
                text, disallowed_special=()
            )
            assert slow.count(text) == len(slow.encode(text))
    finally:
        bpe.tokenizer.cache_clear()


def test_counting_does_not_import_the_package():
    code = (
        "import json, sys\n"
        "from mnemoflow.llm.context import count_text\n"
        "from mnemoflow.memory.tokens import count_tokens\n"
        "counts = [count_text('hello world', 'openai'),\n"
        "          count_tokens('<|endoftext|>', 'cl100k_base')]\n"
        "print(json.dumps([counts, 'bpe_openai' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [[2, 7], False]
