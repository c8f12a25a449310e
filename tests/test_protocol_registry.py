"""Protocols by name: a benchmark's protocols are checked, and each knows its step count."""

from __future__ import annotations

import pytest

from mnemoflow.errors import ConfigError
from mnemoflow.protocols.registry import protocol_steps, protocols_of

SYNTHETIC = {"loader": "synthetic", "params": {"users": 2, "periods": 3}}


def test_default_protocol_is_static_qa_with_the_loaders_steps():
    assert protocols_of("synthetic", SYNTHETIC) == ["qa"]
    assert protocol_steps("qa", SYNTHETIC) == 3


@pytest.mark.parametrize(
    ("protocols", "message"),
    [
        ("qa", "protocols: a non-empty list, got 'qa'"),
        ([], "protocols: a non-empty list, got []"),
        (["qa", "telepathy"], "unknown protocol 'telepathy'"),
    ],
)
def test_bad_protocols_are_one_line_config_errors(protocols, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        protocols_of("synthetic", {**SYNTHETIC, "protocols": protocols})
