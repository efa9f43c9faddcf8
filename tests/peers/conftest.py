"""Fixtures the engine-adapter tests share: our engine and Hugging Face's on the embedded pair, the
same loaded members behind both, loaded once per test module."""

import pytest

from specdec.peers.hf import HFEngine
from specdec.peers.ours import OursEngine


@pytest.fixture(scope="module")
def ours():
    return OursEngine()


@pytest.fixture(scope="module")
def hf(ours):
    return HFEngine(_models=ours._models)  # the same loaded members
