"""Chapter 01, acceptance and residual: one verified token's law, entry by entry; greedy ties in floating point."""
