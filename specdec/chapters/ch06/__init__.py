"""Chapter 06, measured decoding: timed runs, paired summaries, pooled replication, the real-size surface, the page's tables."""
