"""Fixtures the engine-adapter tests share: our engine and Hugging Face's on the embedded pair, the
same loaded members behind both, loaded once per test module; and `gone`, whether a process the
test started no longer runs."""

import pytest

from specdec.peers.hf import HFEngine
from specdec.peers.ours import OursEngine


@pytest.fixture(scope="module")
def ours():
    return OursEngine()


@pytest.fixture(scope="module")
def hf(ours):
    return HFEngine(_models=ours._models)  # the same loaded members


def _gone(pid: int) -> bool:
    """No such process, or a zombie (killed, not yet reaped by whoever adopted it): not running."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def gone():
    """pid -> True when that process no longer runs (`_gone`)."""
    return _gone
