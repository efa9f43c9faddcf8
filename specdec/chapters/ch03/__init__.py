"""Chapter 03, the idealized cost model's tables."""
