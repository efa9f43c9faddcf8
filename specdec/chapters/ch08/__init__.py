"""Chapter 08, alternatives: exact and sampled evidence, measured runs, exact laws on the real pair's logits, the words of its tables."""
