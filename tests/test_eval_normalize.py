"""Normalization with the official statistics file, on numbers computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from mnemoflow.data.validate import DataError
from mnemoflow.eval.memorybench.normalize import group_stats, normalize_set
from tests.shared_data import SHARED_DATA as SHARED  # noqa: E402

MB = SHARED / "memorybench" if SHARED else None
pytestmark = pytest.mark.skipif(MB is None or not MB.exists(), reason="no ../shared data")
CONFIGS = MB / "configs" / "datasets" if MB else None
STATS = MB / "configs" / "final_evaluate_summary_wo_details.json" if MB else None


def frame(rows):
    return pd.DataFrame(rows, columns=["dataset", "test_idx", "value"])


def summary(result):
    rows = result[result["dataset"] == "all"]
    return dict(zip(rows["metric"], rows["value"], strict=True))


def per_dataset(result, metric):
    rows = result[(result["dataset"] != "all") & (result["metric"] == metric)]
    return dict(zip(rows["dataset"], rows["value"], strict=True))


SHORT_SHORT = frame(
    [
        ("LexEval-QA", 1, 0.0),
        ("LexEval-QA", 2, 0.3616236123342547),
        ("NFCats", 1, 5),
        ("NFCats", 2, 3),
        ("NFCats", 3, 1),
        ("JRE-L", 1, 8),
        ("JRE-L", 2, 5),
    ]
)


def test_task_short_short_by_hand():
    # task Short-Short statistics (min, max, mu, sigma):
    #   LexEval-QA 0.0, 0.3616236123342547, 0.12312124506737952, 0.0673206327681146
    #   NFCats     1, 5, 4.4325, 0.9749070468511344
    #   JRE-L      2, 8, 7.85, 0.4716990566028302
    result = normalize_set(SHORT_SHORT, "task:Short-Short", CONFIGS, STATS)
    # min-max: LexEval-QA 0, 1; NFCats 1, 0.5, 0; JRE-L 1, 0.5
    assert per_dataset(result, "minmax") == pytest.approx(
        {"LexEval-QA": 0.5, "NFCats": 0.5, "JRE-L": 0.75}
    )
    z = [
        (0.0 - 0.12312124506737952) / 0.0673206327681146,
        (0.3616236123342547 - 0.12312124506737952) / 0.0673206327681146,
        (5 - 4.4325) / 0.9749070468511344,
        (3 - 4.4325) / 0.9749070468511344,
        (1 - 4.4325) / 0.9749070468511344,
        (8 - 7.85) / 0.4716990566028302,
        (5 - 7.85) / 0.4716990566028302,
    ]
    assert summary(result) == pytest.approx(
        {
            "average": (0.5 + 0.5 + 0.75) / 3,  # 0.5833
            "weighted_average": (0 + 1 + 1 + 0.5 + 0 + 1 + 0.5) / 7,  # 4/7
            "z_score": sum(z) / 7,
        }
    )
    # z: -1.82889, 3.54282, 0.58211, -1.46937, -3.52085, 0.31800, -6.04199; sum -8.41817
    assert summary(result)["z_score"] == pytest.approx(-1.20260, abs=1e-5)
    assert per_dataset(result, "mean") == pytest.approx(
        {"LexEval-QA": 0.3616236123342547 / 2, "NFCats": 3.0, "JRE-L": 6.5}
    )
    assert set(result[result["dataset"] == "all"]["n"]) == {7}


def test_a_dataset_uses_the_statistics_of_the_group_asked_for():
    # LexEval-QA in domain Legal: max 0.3692307652260355 (task Short-Short: 0.3616236123342547)
    legal = group_stats(STATS, "domain", "Legal")["LexEval-QA"]
    assert (legal["max"], legal["mu"]) == (0.3692307652260355, 0.12201772009816057)
    values = frame([("LexEval-QA", 5, 0.3616236123342547)])
    result = normalize_set(values, "domain:Legal", CONFIGS, STATS, partial=True)
    assert per_dataset(result, "minmax")["LexEval-QA"] == pytest.approx(
        0.3616236123342547 / 0.3692307652260355
    )


def test_locomo_k_merge_after_keying_by_dataset_and_test_idx():
    # Locomo-0 and Locomo-1 share test_idx 3; both items count, under "Locomo"
    # (Open-Domain Locomo: min 0, max 1, mu 0.43739903244093, sigma 0.46130109505314704)
    values = frame([("Locomo-0", 3, 0.5), ("Locomo-1", 3, 1.0), ("DialSim-friends", 3, 1)])
    result = normalize_set(values, "domain:Open-Domain", CONFIGS, STATS, partial=True)
    assert per_dataset(result, "minmax") == pytest.approx({"Locomo": 0.75, "DialSim-friends": 1})
    assert result[(result["dataset"] == "Locomo") & (result["metric"] == "z")]["n"].item() == 2
    z_locomo = ((0.5 - 0.43739903244093) + (1.0 - 0.43739903244093)) / 0.46130109505314704
    z_friends = (1 - 0.23529411764705882) / 0.42418250299576343
    assert summary(result) == pytest.approx(
        {
            "average": (0.75 + 1.0) / 2,
            "weighted_average": (0.5 + 1.0 + 1.0) / 3,
            "z_score": (z_locomo + z_friends) / 3,
        }
    )


def test_bad_values_fail_with_one_line():
    with pytest.raises(DataError) as info:
        normalize_set(frame([("LexEval-QA", 1, 0.1)]), "task:Short-Short", CONFIGS, STATS)
    assert str(info.value) == "values: no value for dataset 'JRE-L' of task:Short-Short"
    with pytest.raises(DataError) as info:
        normalize_set(frame([("Locomo-0", 1, 0.1)]), "task:Short-Short", CONFIGS, STATS)
    assert str(info.value) == "values: dataset 'Locomo-0' is not in task:Short-Short"
    twice = frame([("NFCats", 1, 3), ("NFCats", 1, 4)])
    with pytest.raises(DataError, match=r"\(NFCats, 1\) appears twice"):
        normalize_set(twice, "task:Short-Short", CONFIGS, STATS, partial=True)
    with pytest.raises(DataError, match="defined for domain and task sets"):
        normalize_set(twice, "dataset:NFCats", CONFIGS, STATS)


def test_a_missing_item_value_fails_instead_of_counting_as_zero():
    # NaN: pandas' sum would skip it in weighted_average / z_score (dividing by all 3 items, so
    # the item silently counts as min-max 0) while the per-dataset mean would leave it out
    values = frame([("NFCats", 1, 3), ("NFCats", 2, float("nan")), ("NFCats", 3, 5)])
    with pytest.raises(DataError) as info:
        normalize_set(values, "task:Short-Short", CONFIGS, STATS, partial=True)
    assert str(info.value) == "values: (NFCats, 2) has no value (NaN)"
