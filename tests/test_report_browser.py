"""The report and its drill-down in a real headless browser (Debian's chromium + chromium-driver,
driven by selenium; `make system-deps` installs both): the pages load from file://, every table
keeps to the page width, a filter narrows the rows, a question opens, beside a second run."""

from __future__ import annotations

import json
import shutil

import pytest

from mnemoflow.report import build_report
from tests.shared_data import shared_file
from tests.system_packages import apt_install
from tests.test_report import CONFIG, make_results
from tests.test_report_drilldown import make_frames
from tests.workflow import snakemake, workdir

pytestmark = pytest.mark.slow


def _missing() -> list[str]:
    return [p for p in ("chromium", "chromedriver") if shutil.which(p) is None]


@pytest.fixture(scope="module")
def browser():
    reason = apt_install(["chromium", "chromium-driver"], _missing)
    if reason:
        pytest.skip(reason)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[dev]')")
    options = Options()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(argument)
    options.add_argument("--disable-background-networking")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    summary, judgements, ledgers, diagnosis = make_results(folder)
    return build_report(
        summary,
        judgements,
        ledgers,
        CONFIG,
        folder / "report.html",
        diagnosis_path=diagnosis,
        drill=make_frames(extra_questions=120),
    )


def _rows(driver):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#rows tr")


def _wait(driver, condition, timeout=10):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition(d))


def test_the_report_opens_with_headline_tables_within_the_page_width(browser, report):
    from selenium.webdriver.common.by import By

    browser.get(report.as_uri())
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings[0] == "Headline scores"
    assert "Questions (drill-down)" in headings
    # no table is wider than its box: nothing is cut off at the right
    wide = browser.execute_script(
        "return [...document.querySelectorAll('table')]"
        ".filter(t => t.getBoundingClientRect().width > t.parentElement.clientWidth + 1)"
        ".map(t => t.closest('section').id)"
    )
    assert wide == []
    link = browser.find_element(By.CSS_SELECTOR, "#questions a[href*='questions.html#run=']")
    link.click()
    _wait(browser, lambda d: "questions.html" in d.current_url and _rows(d))


def test_a_filter_narrows_the_rows_and_a_question_opens_beside_another_run(browser, report):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    page = report.parent / "report" / "questions.html"
    browser.get(page.as_uri())
    count = browser.find_element(By.ID, "count")
    _wait(browser, lambda d: count.text.endswith("questions") and _rows(d))
    run = Select(browser.find_element(By.ID, "run"))
    assert [o.text for o in run.options] == ["bm25", "full_context", "rag"]

    run.select_by_visible_text("rag")  # 120 questions: a chunk loaded on demand, paged
    _wait(browser, lambda d: count.text == "120 of 120 questions")
    assert len(_rows(browser)) == 50
    assert browser.find_element(By.ID, "page").text == "page 1 of 3"
    Select(browser.find_element(By.ID, "type")).select_by_value("multi-hop")
    _wait(browser, lambda d: count.text == "60 of 120 questions")
    Select(browser.find_element(By.ID, "outcome")).select_by_value("correct")
    _wait(browser, lambda d: count.text == "60 of 120 questions")  # the odd ones: right
    Select(browser.find_element(By.ID, "type")).select_by_value("single-hop")
    _wait(browser, lambda d: count.text == "0 of 120 questions")
    Select(browser.find_element(By.ID, "type")).select_by_value("")
    browser.find_element(By.ID, "search").send_keys("x0011")
    _wait(browser, lambda d: count.text == "1 of 120 questions")

    browser.find_element(By.ID, "search").send_keys(Keys.BACKSPACE * 5)
    _wait(browser, lambda d: count.text == "60 of 120 questions")

    run.select_by_visible_text("bm25")  # the outcome filter stays: one right answer
    _wait(browser, lambda d: count.text == "1 of 3 questions")
    Select(browser.find_element(By.ID, "outcome")).select_by_value("")
    _wait(browser, lambda d: count.text == "3 of 3 questions")
    Select(browser.find_element(By.ID, "compare")).select_by_visible_text("full_context")
    row = next(r for r in _rows(browser) if r.get_attribute("data-id") == "q1")
    row.click()
    cards = _wait(
        browser,
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "#detail .card")[1:]
            and d.find_elements(By.CSS_SELECTOR, "#detail .card")
        ),
    )
    ours, theirs = (card.text for card in cards)
    assert "Where?" in ours and "Paris" in ours and '{"label": "CORRECT"}' in ours
    assert "0.450000 USD" in ours
    assert "full_context — step 0" in theirs and "London" in theirs
    assert "Caroline: turn 25" in theirs  # the evidence item, past the list's cut
    assert "q=q1" in browser.current_url and "vs=" in browser.current_url
    # the address opens the same question again (a page per run and question)
    browser.get(browser.current_url)
    browser.refresh()
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#detail .card")) == 2)


@pytest.fixture(scope="module")
def renamed_run(tmp_path_factory):
    """A workflow run of LoCoMo under another name (``locomo_one``, loader ``locomo``): one
    conversation, its first 24 questions and 6 adversarial ones; the whole history and BM25 over
    messages."""
    record = json.loads(shared_file("locomo", "locomo10.json").read_text(encoding="utf-8"))[0]
    record["qa"] = record["qa"][:24] + [q for q in record["qa"] if q["category"] == 5][:6]
    wd = workdir(tmp_path_factory.mktemp("renamed"))
    (wd / "one.json").write_text(json.dumps([record]), encoding="utf-8")
    override = wd / "renamed.yaml"
    entry = {"loader": "locomo", "source": {"path": str(wd / "one.json")}, "shards": 1}
    run = {"benchmarks": ["locomo_one"], "systems": ["full_context", "bm25_message"]}
    override.write_text(json.dumps({"run": run, "benchmarks": {"locomo_one": entry}}))
    snakemake(wd, configfiles=(override,), targets=("results/report.html",))
    return wd / "results" / "report" / "questions.html"


def test_a_renamed_benchmark_shows_every_question_gold_and_context(browser, renamed_run):
    import pandas as pd
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(renamed_run.as_uri())
    count = browser.find_element(By.ID, "count")
    run = Select(browser.find_element(By.ID, "run"))
    assert [o.text for o in run.options] == ["bm25_message", "full_context"]
    by_system = {}
    for system in ("bm25_message", "full_context"):
        run.select_by_visible_text(system)
        _wait(browser, lambda d: count.text == "30 of 30 questions")
        by_system[system] = browser.execute_script(
            "return records.map(r => ({...r, items: r.items.map(([n, i, t]) => [n, i, t])}))"
        )
    for system, records in by_system.items():
        assert len(records) == 30
        assert all(r["q"] and r["gold"] for r in records), system
        # every item shown is the memory's text, not a bare id
        assert all(t for r in records for _, _, t in r["items"]), system
    assert all(r["items"] for r in by_system["full_context"])
    # BM25 shows what it retrieved: nothing only where its answer retrieved nothing
    answers = pd.read_parquet(
        renamed_run.parents[2] / "results/locomo_one/bm25_message/qa/step0/shard0/answers.parquet"
    )
    nothing = set(answers.loc[answers["retrieved_ids"].map(len) == 0, "question_id"])
    assert {r["id"] for r in by_system["bm25_message"] if not r["items"]} == nothing
    assert len(nothing) < 5
    # the run's summary.md opens with the headline table report.html opens with
    summary = (renamed_run.parents[1] / "summary.md").read_text()
    assert summary.startswith("# mnemoflow summary\n\n## Headline scores\n")
    assert "### locomo_one (step 0)" in summary
    ids = [r["id"] for r in by_system["full_context"]]
    assert ids[:3] == ["conv-26_q0", "conv-26_q1", "conv-26_q2"] and ids[10] == "conv-26_q10"
    adversarial = [r for r in by_system["full_context"] if r["type"] == "adversarial"]
    assert len(adversarial) == 6
    assert all(
        r["gold"].startswith("not mentioned") and r["adversarial_answer"] for r in adversarial
    )
    row = next(r for r in _rows(browser) if r.get_attribute("data-id") == adversarial[0]["id"])
    row.click()
    card = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#detail .card"))[0].text
    assert adversarial[0]["q"] in card and adversarial[0]["adversarial_answer"] in card
