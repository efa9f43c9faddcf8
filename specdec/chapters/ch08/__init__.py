"""Chapter 08, alternatives: exact and sampled evidence, exact laws on the real pair's logits, the page's
tables (its timed runs: `specdec.measure.alternatives`, `make alternatives`)."""
