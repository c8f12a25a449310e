"""The local cluster's pure parts: reading ``slurmd -C`` and ``sinfo``, writing slurm.conf."""

from __future__ import annotations

import pytest

from mnemoflow.ops import cluster

SLURMD_C = (
    "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
    "RealMemory=24105\nUpTime=0-00:40:52\n"
)


def test_parse_slurmd_c_reads_the_node_line():
    node = cluster.parse_slurmd_c(SLURMD_C)
    assert node["NodeName"] == "vm"
    assert node["CPUs"] == "2" and node["CoresPerSocket"] == "2"
    assert node["RealMemory"] == "24105"


def test_parse_slurmd_c_errors_name_what_is_missing():
    with pytest.raises(cluster.ClusterError, match="no 'NodeName=' line"):
        cluster.parse_slurmd_c("UpTime=0-00:01:00\n")
    with pytest.raises(cluster.ClusterError, match=r"lacks \['RealMemory'\]"):
        cluster.parse_slurmd_c(
            "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1"
        )


def test_slurm_conf_declares_the_measured_node_and_no_accounting():
    text = cluster.render_slurm_conf("vm", cluster.parse_slurmd_c(SLURMD_C))
    lines = text.splitlines()
    assert lines[0] == cluster.MARKER  # how `down` knows the file is ours to remove
    assert "SlurmctldHost=vm" in lines
    assert (
        "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
        "RealMemory=24105 State=UNKNOWN"
    ) in lines
    assert "PartitionName=debug Nodes=vm Default=YES MaxTime=INFINITE State=UP" in lines
    # squeue-based status polling needs finished jobs kept >= 120 s; no slurmdbd here
    assert "MinJobAge=300" in lines
    assert "AccountingStorageType=accounting_storage/none" in lines
    assert "StateSaveLocation=/var/spool/mnemoflow-slurm/state" in lines


def test_sinfo_states():
    assert cluster.parse_sinfo_states("vm idle\nn2 down*\n\n") == {"vm": "idle", "n2": "down*"}
    assert cluster.parse_sinfo_states("") == {}


def test_up_without_the_packages_is_one_line_naming_apt_get(monkeypatch, capsys):
    from mnemoflow import cli

    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster, "find_program", lambda name: None)
    assert cli.main(["cluster", "up"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "mnemoflow cluster: error: missing munged, munge, unmunge, slurmctld, slurmd, sinfo, "
        "sbatch, squeue; install them with: apt-get install -y slurm-wlm munge\n"
    )
