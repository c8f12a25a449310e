"""Which prompt each static-QA judge asks with: its version and a fingerprint of its code.

A prompt version is a name someone has to bump; the fingerprint (:func:`mnemoflow.codeversion.
code_version` of the judge's request builder and the prompt texts it reads) changes with any edit,
bumped or not. The report's dossier names both beside each run's judge. Kept out of
``eval/static_qa/judges.py`` so that adding to it does not change the judge jobs' own fingerprint.
"""

from __future__ import annotations

from mnemoflow.codeversion import code_version
from mnemoflow.eval.benchmark_metric import JUDGES


def prompt_fingerprints() -> dict[str, dict[str, str]]:
    """judge name (``longmemeval``, ``locomo``, ``generic``) -> ``prompt_version`` and
    ``prompt_fingerprint``."""
    out = {}
    for name in JUDGES.names():
        kind = JUDGES.get(name)
        builder = f"{kind.build.__module__}:{kind.build.__name__}"
        out[name] = {"prompt_version": kind.version, "prompt_fingerprint": code_version(builder)}
    return out
