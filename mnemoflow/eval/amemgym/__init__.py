"""AMemGym: reply parsers, scores from raw replies and baselines, the workflow's score rows."""
