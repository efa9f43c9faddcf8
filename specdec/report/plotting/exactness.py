"""Figures of the exactness chapters (filled in by their chapter conversion)."""

from __future__ import annotations

__all__: list = []
