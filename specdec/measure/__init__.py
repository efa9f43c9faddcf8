"""Measurement: the engine's subjects, timing harness, cost curves, acceptance recorder, controlled
acceptance, Hugging Face reference, command lines (`make bench`, `make gpu`) and the chapters'
computations."""
