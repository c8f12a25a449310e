"""A preset's ``requires_layers``: the files it goes on must come first, in order, or the
workflow refuses at parse time in one line naming the preset (mnemoflow/config_layers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mnemoflow.config_layers import check_layer_order, required_layers
from mnemoflow.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
REFERENCE = "configs/reference/amemgym-released.yaml"


@pytest.fixture
def files(tmp_path):
    """base.yaml, extra.yaml and preset.yaml (on base then extra), site.yaml, under tmp_path."""
    (tmp_path / "configs").mkdir()
    for name in ("base", "extra"):
        (tmp_path / "configs" / f"{name}.yaml").write_text("run: {}\n")
    preset = tmp_path / "preset.yaml"
    preset.write_text("requires_layers: [configs/base.yaml, configs/extra.yaml]\nrun: {}\n")
    (tmp_path / "site.yaml").write_text("models: {}\n")
    return {p.stem: p for p in [*tmp_path.glob("*.yaml"), *tmp_path.glob("configs/*.yaml")]}


def _check(files, tmp_path, *names):
    check_layer_order([files[n] for n in names], tmp_path)


def test_the_layers_in_their_order_before_the_preset_pass(files, tmp_path):
    _check(files, tmp_path, "base", "extra", "preset", "site")
    _check(files, tmp_path, "base", "site", "extra", "preset")  # others may sit in between
    _check(files, tmp_path, "site")  # no preset: nothing to check


def test_a_missing_layer_is_refused_naming_the_preset_and_the_order(files, tmp_path):
    with pytest.raises(ConfigError) as error:
        _check(files, tmp_path, "base", "preset", "site")
    message = str(error.value)
    assert message == (
        "preset.yaml: requires_layers: configs/extra.yaml is not among the config files; "
        "give --configfile configs/base.yaml configs/extra.yaml preset.yaml [your site file]"
    )


def test_a_layer_after_the_preset_or_out_of_order_is_refused(files, tmp_path):
    with pytest.raises(ConfigError, match=r"^preset.yaml: requires_layers: configs/extra.yaml "):
        _check(files, tmp_path, "base", "preset", "extra")
    with pytest.raises(ConfigError, match=r"configs/extra.yaml must come before it") as error:
        _check(files, tmp_path, "extra", "base", "preset")
    assert "(given: configs/extra.yaml configs/base.yaml preset.yaml)" in str(error.value)
    assert "\n" not in str(error.value)


def test_a_copy_of_a_layer_elsewhere_counts_as_that_layer(files, tmp_path):
    copy = tmp_path / "mine" / "configs" / "base.yaml"
    copy.parent.mkdir(parents=True)
    copy.write_text("run: {}\n")
    check_layer_order([copy, files["extra"], files["preset"]], tmp_path / "elsewhere")


def test_requires_layers_must_be_a_list_of_paths(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("requires_layers: configs/base.yaml\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: requires_layers must be a list"):
        required_layers(bad)


def test_every_amemgym_preset_goes_on_the_reference_file_and_every_layer_exists():
    presets = sorted((REPO / "configs" / "paper").glob("*.yaml"))
    for preset in presets:
        layers = required_layers(preset)
        assert all((REPO / layer).is_file() for layer in layers), preset
        text = preset.read_text()
        if REFERENCE in text:  # its comment tells people to layer it on the reference
            assert layers == [REFERENCE], preset
    assert sum(bool(required_layers(p)) for p in presets) == 4
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    assert schema["properties"]["requires_layers"]["type"] == "array"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["plan", "run"])
def test_plan_and_run_refuse_a_preset_before_its_layer(command):
    """configs/paper/amemgym-evolution.yaml before the reference merged into the reference's
    5 systems x 2 protocols: refused when the Snakefile is parsed, by plan and run alike."""
    files = ["configs/paper/amemgym-evolution.yaml", REFERENCE, "configs/site.offline.yaml"]
    extra = ["-n"] if command == "run" else []
    done = subprocess.run(
        [sys.executable, "-m", "mnemoflow.cli", command, *extra, "--configfile", *files],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    expected = (
        f"configs/paper/amemgym-evolution.yaml: requires_layers: {REFERENCE} must come before it"
    )
    assert expected in done.stdout + done.stderr
