"""Figures of the measured chapters (filled in by their chapter conversion)."""

from __future__ import annotations

__all__: list = []
