"""The config files a Snakemake command line reads, found by one function for every command that
reads them before Snakemake does (``run``/``plan`` check them, ``batch status|collect`` read the
cache path from them)."""

from __future__ import annotations

from mnemoflow.commands.batch import run_config


def test_batch_status_reads_the_config_files_the_run_reads(tmp_path):
    """``mnemoflow batch status|collect`` find the cache in the config the run reads, whatever
    form the command line takes (``--configfile=F``, a target after ``-d DIR``): a file missed
    is another cache, where no batch is outstanding, silently."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text("cache: base\nseed: 3\n", encoding="utf-8")
    layer = tmp_path / "site.yaml"
    layer.write_text("cache: site\n", encoding="utf-8")
    for extra in (
        ["--directory", str(work), "--configfile", str(layer)],
        [f"--directory={work}", f"--configfile={layer}"],
        ["--configfile", str(layer), "-d", str(work), "all"],
    ):
        assert run_config(extra) == (work, {"cache": "site", "seed": 3}), extra
