"""Model-free metrics and judge-reply readers that more than one family uses (F1, METEOR,
ROUGE-L, BERTScore, readability, verdicts). They import nothing else of ``eval``."""
