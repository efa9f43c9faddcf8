"""Chapter 10, other engines: the audit plan, runs, reproducers, timing and words."""
