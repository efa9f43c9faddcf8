"""Shared test setup: the repository root on sys.path, and the paths tests read."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

try:  # small tensors on a shared 2-core machine: one thread is several times faster than two
    import torch

    torch.set_num_threads(1)
except ImportError:
    pass
