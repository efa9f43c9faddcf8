"""Chapter 09, serving: the checks of the serving loop, the tables and values its page shows (vLLM's server runs: `make engines`)."""
