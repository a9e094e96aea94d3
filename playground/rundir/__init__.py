"""A run's directory: the files it writes (run.json, metrics.jsonl, ...), its sinks and its score."""
