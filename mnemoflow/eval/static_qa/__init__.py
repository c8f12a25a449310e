"""Static QA (LongMemEval, LoCoMo, generic QA): judges, judge panel and probes, retrieval
metrics, scores per step, failure diagnosis, footprint, errata scoring, re-scoring."""
