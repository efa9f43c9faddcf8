"""The table of contents never implies GPU measurements that do not exist (book/assemble.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("assemble", ROOT / "book" / "assemble.py")
assemble = importlib.util.module_from_spec(spec)
spec.loader.exec_module(assemble)

HEAD = "cuda_here,gpu_tables,real_gpu,status\n"


def test_gpu_appendix_title_follows_the_committed_status(tmp_path):
    status = tmp_path / "status.csv"
    status.write_text(HEAD + "False,none,False,none\n")
    assert assemble.gpu_part_status(status) == "ready, not yet run"
    status.write_text(HEAD + "True,latency,True,measured\n")  # a real run: the title changes
    assert assemble.gpu_part_status(status) == "measured"
    assert assemble.gpu_part_status(tmp_path / "absent.csv") == "ready, not yet run"
    assert assemble.gpu_part_status() == "ready, not yet run"  # the committed status: no GPU run


def test_the_gpu_protocol_is_an_appendix_titled_by_its_status():
    """Chapter 07 sits in the appendices, after every measured chapter, under a title the status fills."""
    toc = (ROOT / "book" / "_toc.yml").read_text()
    parts = toc.split("- caption: ")
    appendix = next(p for p in parts if p.startswith("Appendices"))
    assert "file: notebooks/07_gpu_decoding" in appendix and 'title: "The GPU protocol: GPU_PART_STATUS"' in appendix
    assert toc.index("Appendices") > toc.index("notebooks/10_engines")
    assert assemble.toc_notebooks(ROOT / "book" / "_toc.yml").count("07_gpu_decoding") == 1
