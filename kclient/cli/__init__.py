"""Command-line tools: the console producer, the producer perf tool and ``kclient demo``."""
