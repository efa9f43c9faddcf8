"""The reproduction status page: every recomputed table against the committed one."""
