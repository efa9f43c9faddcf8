"""Reporting, at the bottom of the layers: paths, tidy results with provenance, figures, the
chapters' common frame, and the reproduction status."""
