"""Chapter 06, measured decoding: the timed runs, their paired summaries, the values the prose quotes, the real-size surface."""
