# mnemoflow: benchmark memory and continual learning in LLM assistants.
# Table of contents only; rules live in rules/, logic in the mnemoflow package.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/dialogues.smk"
include: "rules/environment.smk"
include: "rules/memory.smk"
include: "rules/answer.smk"
include: "rules/judge.smk"
include: "rules/feedback.smk"
include: "rules/summarize.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        get_final_output(),


# The endpoints' key variables, checked when a run starts (a dry run or `mnemoflow plan` needs none).
onstart:
    check_keys()


# The managed endpoints this run started (docs/slurm.md) stop when it ends, however it ends.
onsuccess:
    stop_endpoints()


onerror:
    stop_endpoints()
