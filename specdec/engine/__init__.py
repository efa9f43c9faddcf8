"""The decoding engine: drafters, the autoregressive and speculative loop with KV rollback, and
draft-length schedules."""
