"""Chapter 06, measured decoding: timed runs, paired summaries, pooled replication, the page's tables (the real-size surface: `make surface`)."""
