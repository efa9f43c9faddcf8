"""Other engines (Hugging Face, vLLM, llama.cpp's server) and ours behind one interface, each run as its users run it:
"continue these prompts n times under these sampling rules and this speculative configuration;
return the tokens and the engine's own counters"."""
from specdec.peers.interface import Continuations, Engine, Sampling, Speculation

__all__ = ["Continuations", "Engine", "Sampling", "Speculation"]
