"""Fixtures the engine-adapter tests share: our engine and Hugging Face's on the embedded pair, the
same loaded members behind both, loaded once per test module; and `gone`, whether a process the
test started no longer runs."""

import time

import pytest

from specdec.peers.hf import HFEngine
from specdec.peers.ours import OursEngine


@pytest.fixture(scope="module")
def ours():
    return OursEngine()


@pytest.fixture(scope="module")
def hf(ours):
    return HFEngine(_models=ours._models)  # the same loaded members


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """No such process, or a zombie (killed, not yet reaped by whoever adopted it): not running --
    within ``within_s`` seconds, since a signal is delivered asynchronously and a loaded machine may
    take a moment to end a process it was just sent (False only if it still runs then)."""
    end = time.monotonic() + within_s
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


@pytest.fixture
def gone():
    """pid -> True when that process no longer runs within 5 s (`_gone`)."""
    return _gone
