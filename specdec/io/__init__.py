"""Files: every path the project reads or writes, and typed tables with provenance (the bottom layer)."""
