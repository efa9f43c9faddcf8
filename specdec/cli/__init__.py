"""Command lines: make bench, make gpu, make serve-bench, make readme."""
