"""The table of contents never implies GPU measurements that do not exist (book/assemble.py)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("assemble", ROOT / "book" / "assemble.py")
assemble = importlib.util.module_from_spec(spec)
spec.loader.exec_module(assemble)

HEAD = "cuda_here,gpu_tables,real_gpu,status\n"


def test_gpu_part_caption_follows_the_committed_status(tmp_path):
    status = tmp_path / "status.csv"
    status.write_text(HEAD + "False,none,False,no GPU tables\n")
    assert assemble.gpu_part_status(status) == "the protocol, not yet run"
    status.write_text(HEAD + "True,latency,True,measured\n")  # a real run: the caption changes
    assert assemble.gpu_part_status(status) == "measured"
    assert assemble.gpu_part_status(tmp_path / "absent.csv") == "the protocol, not yet run"
    assert "GPU_PART_STATUS" in (ROOT / "book" / "_toc.yml").read_text()  # the placeholder it fills
