"""``mnemoflow cluster up|down|status``: a one-node SLURM cluster to try the SLURM profile on.

Run ``snakemake --workflow-profile profiles/slurm-local`` against it; see docs/slurm.md.
"""

from __future__ import annotations

import argparse
import json

from mnemoflow.commands import COMMANDS
from mnemoflow.ops import cluster


@COMMANDS.register("cluster", help="start/stop a single-node SLURM cluster on this machine (root)")
def register(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    start = actions.add_parser("up", help="start munged, slurmctld, slurmd; wait for an idle node")
    start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    actions.add_parser("down", help="stop exactly the daemons `up` started, by PID")
    actions.add_parser("status", help="which daemons run, and the node states sinfo reports")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "up":
            state = cluster.up(timeout=args.timeout)
            pids = ", ".join(f"{d['name']} {d['pid']}" for d in state["daemons"])
            took = state.get("seconds_to_idle")
            print(
                f"cluster up: node {state['host']} idle, partition {cluster.PARTITION}"
                + (" (already running)" if state.get("already_running") else f" ({took}s)")
                + f"; started {pids or 'nothing'}; config {cluster.SLURM_CONF}"
            )
        elif args.action == "down":
            stopped = cluster.down()
            print(f"cluster down: stopped {', '.join(stopped) or 'nothing (none running)'}")
        else:
            print(json.dumps(cluster.status(), indent=2))
    except cluster.ClusterError as exc:
        raise OSError(str(exc)) from None  # cli.main prints it as one line, exit 2
    return 0
