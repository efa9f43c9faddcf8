"""Chapter 09, serving: the checks of the serving loop, vLLM's server runs, the tables and values its page shows."""
