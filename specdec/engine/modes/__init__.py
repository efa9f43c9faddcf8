"""Optional forwards of the engine (lean, compiled, its preallocated cache): never needed for correctness, each tested to give the eager engine's tokens."""
