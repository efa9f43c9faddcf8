"""Chapter 05, measured acceptance: the runs with the acceptance recorder and their tables."""
