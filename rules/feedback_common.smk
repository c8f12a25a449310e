# Paths and input / params helpers of the feedback rules (rules/feedback.smk).
from mnemoflow.protocols.feedback import set_name as feedback_set_name

FB_STEP = "results/{benchmark}/{system}/{protocol}/step{step}"
FB_TRAIN = "results/{benchmark}/{system}/feedback"
FB_TRAIN_FILE = f"{FB_TRAIN}/train_dialogues.parquet"
FB_MEMORY = f"{FB_STEP}/memory"
FB_LOGS = "results/logs/{benchmark}/{system}/{protocol}/step{step}"
FB_ALL = "off_policy|stepwise_off_policy|on_policy|train_performance"
FB_BUILT = "off_policy|stepwise_off_policy|on_policy"


def fb_settings(wildcards):
    return benchmark_spec(wildcards).get("feedback", {}) or {}


def fb_loader(wildcards):
    return benchmark_spec(wildcards)["loader"]


def fb_live(wildcards):
    """On-policy steps after 0 converse live; everything else replays recorded dialogues."""
    return wildcards.protocol == "on_policy" and int(wildcards.step) > 0


def fb_built(wildcards):
    """train_performance asks the training split of the off-policy memory: it builds none."""
    return (
        "off_policy"
        if wildcards.protocol == "train_performance"
        else wildcards.protocol
    )


def fb_step_path(name):
    def path(wildcards):
        step = FB_STEP.format(**{**dict(wildcards), "protocol": fb_built(wildcards)})
        return f"{step}/{name}"

    return path


def fb_train_input(wildcards):
    if wildcards.protocol == "on_policy":
        return []
    return FB_TRAIN_FILE.format(**dict(wildcards))


def fb_previous(wildcards):
    step = int(wildcards.step)
    if step == 0:
        return []
    return FB_MEMORY.format(**{**dict(wildcards), "step": step - 1})


def fb_step_settings(wildcards):
    """Only the settings a step depends on (a batch_size edit re-plans steps >= 1 only)."""
    given = fb_settings(wildcards)
    step, protocol = int(wildcards.step), wildcards.protocol
    keys = ["seed", "retrieve_k"]
    if step > 0 and protocol in ("stepwise_off_policy", "on_policy"):
        keys.append("batch_size")
    if step > 0 and protocol == "stepwise_off_policy":  # checked: no dialogue left out
        keys.append("train_items")
    if fb_live(wildcards):
        keys += ["max_rounds", "structured_output"]
    return {key: given[key] for key in keys if key in given}


def fb_scoring_models(*roles):
    """A scoring job's bindings: ``roles``, agent, judge, memory_writer, embedder, and the
    critic (WritingBench) when bound; left out, it takes the judge's."""
    bound = models(*roles, "agent", "judge", "memory_writer", "embedder")
    if config["models"].get("critic"):
        bound["critic"] = config["models"]["critic"]
    return bound


def fb_step_models(wildcards):
    if fb_live(wildcards):
        return fb_scoring_models("user")
    return fb_scoring_models()


def fb_generation(wildcards):
    given = fb_settings(wildcards)
    keys = ["max_rounds", "retrieve_k", "structured_output"]
    return {key: given[key] for key in keys if key in given}


def fb_source(wildcards):
    return fb_settings(wildcards).get("dialogues", "generated")


def fb_generation_models(wildcards):
    if fb_source(wildcards) == "data":
        return {}
    return models("agent", "user", "judge", "memory_writer", "embedder")


def fb_answer_settings(wildcards):
    given = fb_settings(wildcards)
    return {"retrieve_k": given["retrieve_k"]} if "retrieve_k" in given else {}


def fb_selected(spec):
    """The set a MemoryBench benchmark names (``set: KIND:NAME`` or ``select: {KIND: NAME}``)."""
    return spec.get("set") or spec.get("select")


def fb_set_name(wildcards):
    return feedback_set_name(fb_selected(benchmark_spec(wildcards)))


def fb_normalizes(spec):
    """A domain / task set with an official statistics file (``normalize: {stats: FILE}``)."""
    if not spec.get("normalize") or not fb_selected(spec):
        return False
    return not feedback_set_name(fb_selected(spec)).startswith("dataset:")


def all_normalized():
    """normalized.parquet of every step of a MemoryBench domain / task set with a stats file."""
    return [
        f"{RUN_STEP.format(benchmark=b, system=s, protocol=p, step=k)}/normalized.parquet"
        for b in config["run"]["benchmarks"]
        if fb_normalizes(config["benchmarks"][b])
        for s in config["run"]["systems"]
        for p in protocols_for(b)
        if p != "qa"
        for k in steps_of(b, p)
    ]
