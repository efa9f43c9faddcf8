"""DEVICE and DTYPE reach the measured chapters' models: `make reproduce DEVICE=cuda DTYPE=bfloat16`
passes both to every chapter that declares them (notebooks/run.py passes only declared
parameters), the chapters hand them to `load_subjects`, and the chapter's recorded parameters (its
provenance) hold them.  Checked on CPU: the weights arrive in the dtype asked for."""

import json
import re

import pytest
import torch

from specdec.chapters.ch06.runs import EmbeddedPair
from specdec.measure.subjects import load_subjects
from specdec.io.paths import ROOT

MEASURED = ("04", "05", "06", "08", "09")


def test_the_dtype_reaches_the_weights_and_a_bad_one_is_named():
    s = load_subjects("cpu", "bfloat16")
    assert next(s.target.parameters()).dtype == torch.bfloat16
    assert {next(d.parameters()).dtype for d in s.drafts.values() if hasattr(d, "parameters")} == {torch.bfloat16}
    assert next(load_subjects("cpu").target.parameters()).dtype == torch.float32  # the default stays float32
    with pytest.raises(ValueError, match="unknown dtype 'int8'.*bfloat16"):
        load_subjects("cpu", "int8")
    pair = EmbeddedPair("cpu", 0, 16, 1, dtype="float16")
    assert next(pair.target.parameters()).dtype == torch.float16


def test_every_measured_chapter_declares_device_and_dtype_and_make_passes_both():
    import sys

    sys.path.insert(0, str(ROOT / "notebooks"))
    import run  # notebooks/run.py

    params = re.search(r"^NB_PARAMS := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "DEVICE=$(DEVICE)" in params and "DTYPE=$(DTYPE)" in params
    for n in MEASURED:
        nb = next((ROOT / "notebooks").glob(f"{n}_*.ipynb"))
        declared = run.declared_parameters(nb)
        assert {"DEVICE", "DTYPE"} <= declared, nb.name
        source = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        assert "P.DTYPE" in source or n == "06", nb.name  # chapter 06 hands P to its library (decoding_chapter)
