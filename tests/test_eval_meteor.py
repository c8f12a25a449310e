"""METEOR (WritingPrompts) on worked examples, and its offline data: WordNet and Punkt."""

from __future__ import annotations

import nltk
import pytest

from mnemoflow.eval.metrics import meteor as m


def test_worked_example_with_two_chunks():
    # ref: the cat sat on the mat (6)   hyp: the cat was sitting on the mat (7)
    # matches: the, cat, on, the, mat = 5 ("sitting" stems to "sit", not "sat"; no synonym)
    # P = 5/7, R = 5/6, Fmean = 10PR / (R + 9P) = 250/305 = 0.819672
    # chunks: "the cat" | "on the mat" = 2, frag = 2/5, penalty = 0.5 * 0.4**3 = 0.032
    # METEOR = 0.819672 * (1 - 0.032) = 0.793443
    assert m.meteor("the cat sat on the mat", "the cat was sitting on the mat") == pytest.approx(
        250 / 305 * 0.968
    )


def test_worked_example_one_chunk_no_synonym():
    # he is happy / he is glad: 2 matches of 3 ("glad" has no WordNet lemma "happy")
    # Fmean = 2/3, one chunk: penalty = 0.5 * (1/2)**3 = 0.0625 -> 0.625
    assert m.meteor("He is happy", "He is glad") == pytest.approx(0.625)


def test_wordnet_synonyms_match():
    # "kid" is a WordNet lemma of a synset of "child": a match in the synonym stage.
    # 3 of 3 words matched, one chunk: Fmean 1, penalty 0.5 * (1/3)**3 -> 1 - 1/54
    assert m.meteor("the child laughed", "the kid laughed") == pytest.approx(1 - 1 / 54)


def test_identical_and_disjoint_texts():
    assert m.meteor("the dog barked", "the dog barked") == pytest.approx(1 - 1 / 54)
    assert m.meteor("a b c", "x y z") == 0.0


def test_punctuation_is_a_token():
    # "He is happy." tokenizes to 4 tokens; against 3: P = 3/4, R = 1
    # Fmean = 10 * .75 / (1 + 6.75) = 0.967742; penalty 0.5 / 27 -> 0.949821
    assert m.meteor("He is happy", "He is happy.") == pytest.approx(7.5 / 7.75 * (1 - 0.5 / 27))


def test_word_tokenize_splits_sentences_like_nltk():
    text = 'Dr. Watson arrived at 5 p.m. on Jan. 3rd. He said: "It\'s over." Then he left!'
    assert m.word_tokenize(text) == [
        "Dr.", "Watson", "arrived", "at", "5", "p.m.", "on", "Jan.", "3rd", ".", "He", "said",
        ":", "``", "It", "'s", "over", ".", "''", "Then", "he", "left", "!",
    ]  # fmt: skip


def test_word_tokenize_equals_nltk_reading_the_same_model_as_punkt_tab(tmp_path, monkeypatch):
    """Written in nltk's punkt_tab format and loaded by nltk's own word_tokenize: same tokens."""
    from nltk.tokenize.punkt import save_punkt_params

    target = tmp_path / "tokenizers" / "punkt_tab" / "english"
    target.mkdir(parents=True)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])
    save_punkt_params(m._sentence_splitter()._params, str(target))
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    texts = [
        "Mr. Smith went to Washington. He didn't stay long; it rained.",
        "Was it U.S. policy? Yes. The U.N. said so in Oct. 1999 -- twice!",
        "Once upon a time... there was a dragon.\n\nIt slept.",
    ]
    try:
        for text in texts:
            assert m.word_tokenize(text) == nltk.word_tokenize(text)
    finally:
        nltk.tokenize._get_punkt_tokenizer.cache_clear()


def test_lexnames_is_wordnets_table():
    lines = m.lexnames_text().splitlines()
    assert (len(lines), lines[0], lines[3], lines[44]) == (
        45,
        "00\tadj.all\t3",
        "03\tnoun.Tops\t1",
        "44\tadj.ppl\t3",
    )


def test_missing_wordnet_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMOFLOW_WORDNET", str(tmp_path))
    monkeypatch.setattr(m, "WORDNET_DIRS", ())
    m.wordnet.cache_clear()
    try:
        with pytest.raises(m.MissingMetricResource) as err:
            m.meteor("a", "a")
    finally:
        m.wordnet.cache_clear()
    message = str(err.value)
    assert "\n" not in message
    assert "apt-get install wordnet-base" in message and str(tmp_path) in message


def test_make_test_and_make_run_install_wordnet_first():
    """CI starts bare: the Makefile's own targets must install what METEOR reads."""
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    targets = {
        line.split(":")[0]: line.split(":", 1)[1].split()
        for line in makefile.splitlines()
        if line and not line.startswith(("\t", "#", " ", ".")) and ":" in line and "=" not in line
    }
    assert "system-deps" in targets["test"] and "system-deps" in targets["run"]
    assert "wordnet-base" in makefile.split("system-deps:", 1)[1].split("\n\n")[0]
