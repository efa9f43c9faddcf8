"""The one loader: sha256, safetensors only, offline hub ids, vocabulary check, names; the n-gram law;
the committed family against its card."""

import json
import math
import shutil

import pytest
import torch

from specdec.family import card as card_mod, loader as models, manifest, ngram, tokens, train
from specdec.family.loader import load_tokenizer
from specdec.family.make import export
from specdec.io.paths import MODELS_DIR

TINY = dict(n_embd=32, n_head=2, n_positions=64)


def _tiny(path, n_layer, vocab_size=2048, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        m = train.build_model(train.TrainConfig(n_layer=n_layer, vocab_size=vocab_size, block=64, **TINY))
    m.save_pretrained(path)
    return path


@pytest.fixture()
def family(tmp_path, monkeypatch):
    """A tiny stand-in family laid out like data/models, with its own SHA256SUMS."""
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODELS_DIR / f, tmp_path / f)
    _tiny(tmp_path / "target", 2)
    _tiny(tmp_path / "draft-small", 1, seed=1)
    ids = tokens.encode_split(load_tokenizer(), "validation")
    ngram.NGramModel.fit(ids, 2048).save(tmp_path / "ngram.safetensors")
    manifest.write_sums(tmp_path)
    monkeypatch.setattr(models, "MODELS_DIR", tmp_path)
    return tmp_path


def test_load_pair_embedded(family):
    pair = models.load_pair()
    assert isinstance(pair, models.Pair)
    assert pair.target.config.n_layer == 2 and pair.draft.config.n_layer == 1
    assert not pair.target.training and pair.target.dtype == torch.float32
    assert len(pair.tokenizer) == 2048
    assert models.load_ngram().vocab_size == 2048


def test_altered_file_is_detected(family):
    f = family / "draft-small" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(models.ModelUnavailableError, match="altered"):
        models.load_pair()


def test_missing_weights_and_manifest(family):
    (family / "target" / "model.safetensors").unlink()
    with pytest.raises(models.ModelUnavailableError, match="missing"):
        models.load_model("embedded")
    (family / "SHA256SUMS").unlink()
    with pytest.raises(models.ModelUnavailableError, match="not installed"):
        models.load_pair()


def test_pickle_checkpoint_refused(tmp_path):
    d = _tiny(tmp_path / "m", 1)
    (d / "model.safetensors").unlink()
    torch.save({"w": torch.zeros(1)}, d / "pytorch_model.bin")
    with pytest.raises(models.ModelUnavailableError, match="pickle"):
        models.load_model(str(d))


def test_vocabulary_mismatch_raises(tmp_path):
    a, b = _tiny(tmp_path / "a", 1), _tiny(tmp_path / "b", 1, vocab_size=2050)
    with pytest.raises(ValueError, match="vocabularies differ: 2048 vs 2050"):
        models.load_pair(str(a), str(b))
    tok = load_tokenizer()
    other = tokens.train_tokenizer("to be or not to be, that is the question " * 20, 2048)
    ma, mb = models.load_model(str(a)), models.load_model(str(a))
    models.check_compatible(ma, mb, tok, tok)                          # the same mapping passes
    with pytest.raises(ValueError, match="different ids"):
        models.check_compatible(ma, mb, tok, other)


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}])
def test_unreachable_hub_id_gives_clear_error(monkeypatch, tmp_path, env):
    monkeypatch.setenv("HF_HOME", str(tmp_path))                       # an empty cache
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(models.ModelUnavailableError) as e:
        models.load_pair("someone/not-a-local-model", "someone/not-a-local-draft")
    assert "someone/not-a-local-model" in str(e.value) and "local copy" in str(e.value)
    assert e.value.__suppress_context__                                # no chained trace


def test_dtype_and_bad_arguments():
    assert models.resolve_dtype(None, "cpu") == torch.float32
    assert models.resolve_dtype(None, "cuda") == torch.bfloat16
    assert models.resolve_dtype("fp16", "cpu") == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        models.resolve_dtype("float8", "cpu")
    with pytest.raises(ValueError, match="no default draft"):
        models.load_pair("some/model")


# ------------------------------------------------------------------------------------ n-gram

def test_ngram_hand_worked_witten_bell(tmp_path):
    # corpus 0 1 2 0 1 2 0 1 3, V = 4: unigram (c+1)/(9+4); after 1: c=3, N1+=2; after (0,1): c=3, N1+=2
    m = ngram.NGramModel.fit(torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 3]), 4, min_count3=1)
    p1 = torch.tensor([4, 4, 3, 2], dtype=torch.float64) / 13
    p2 = (torch.tensor([0, 0, 2, 1], dtype=torch.float64) + 2 * p1) / 5
    p3 = (torch.tensor([0, 0, 2, 1], dtype=torch.float64) + 2 * p2) / 5
    got = m.probs(torch.tensor([[0, 1], [3, 1]]))
    assert torch.allclose(got[0], p3, atol=1e-12) and got[0, 2].item() == pytest.approx(194 / 325)
    assert torch.allclose(got[1], p2, atol=1e-12)                      # unseen (3,1): back off
    assert torch.allclose(m.probs(torch.zeros(1, 0, dtype=torch.long))[0], p1)
    ids = torch.tensor([0, 1, 2, 3, 1, 3])
    seq = m.sequence_logprobs(ids)
    ref = [m.probs(ids[None, max(0, i - 2):i]).log()[0, ids[i]] for i in range(6)]
    assert torch.allclose(seq, torch.stack(ref), atol=1e-12)
    m.save(tmp_path / "ng.safetensors")
    again = ngram.NGramModel.load(tmp_path / "ng.safetensors")
    assert torch.equal(again.logits(torch.tensor([[0, 1]])), m.logits(torch.tensor([[0, 1]])))
    with pytest.raises(ValueError, match="token ids"):
        m.logits(torch.tensor([[0, 4]]))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        m.logits(torch.tensor([0, 1]))


# ------------------------------------------------------------- the committed family (data/models)

committed = pytest.mark.skipif(not (MODELS_DIR / "card.json").exists(),
                               reason="embedded weights not committed yet")


@committed
def test_committed_family_checksums_and_perplexity_match_card():
    """Each model's loss on the card's fixed slice (4 x 256 test tokens) equals card.json within
    2e-3 nats: fp32 re-evaluation differs only by summation order (~1e-6); altered weights move it."""
    card = json.loads((MODELS_DIR / "card.json").read_text())
    windows = card_mod.check_windows(load_tokenizer())
    for name, short in [("target", "embedded")] + [(n, "embedded-" + n.split("-")[1]) for n in
                                                   ("draft-small", "draft-medium", "draft-distilled")]:
        if name not in card["models"]:
            continue
        m = models.load_model(short)                                   # sha256-checked
        assert train.mean_loss(m, windows) == pytest.approx(card["models"][name]["check_nll"], abs=2e-3)
        assert math.exp(card["models"][name]["validation_loss"]) == pytest.approx(
            card["models"][name]["validation_ppl"])


@committed
def test_committed_family_meets_the_issue():
    """Sizes as the model card states them (target ~15M, drafts ~0.7M and 2-3M); the target's validation
    perplexity at least 15% below every other model's, i.e. a loss margin >= -ln(0.85) = 0.1625
    nats; and the distilled draft learned from the committed target, not an earlier one."""
    card = json.loads((MODELS_DIR / "card.json").read_text())
    ms = card["models"]
    assert 13e6 <= ms["target"]["params"] <= 17e6
    assert 0.6e6 <= ms["draft-small"]["params"] <= 0.8e6
    assert 2e6 <= ms["draft-medium"]["params"] <= 3e6
    need = -math.log(0.85)
    for name, m in ms.items():
        if name != "target":
            assert m["validation_loss"] - ms["target"]["validation_loss"] >= need, name
    assert ms["draft-distilled"]["teacher_sha256"] == manifest.read_sums()["target/model.safetensors"]


def test_card_written_from_logs_and_weights(tmp_path, monkeypatch):
    """write_card on a tiny exported family: numbers recomputable, every file checksummed."""
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(MODELS_DIR / f, tmp_path / f)
    tok = load_tokenizer()
    va, te = tokens.encode_split(tok, "validation"), tokens.encode_split(tok, "test")
    for name, layers in (("target", 2), ("draft-small", 1)):
        cfg = train.TrainConfig(n_layer=layers, n_embd=32, n_head=2, block=64, batch_size=2, max_steps=2,
                                eval_every=2, eval_blocks=2, threads=1)   # 512 positions, as the card evaluates
        model, log = train.train_model(cfg, va, te)
        export(model, name, cfg, log, 1.0, out_dir=tmp_path,
                     extra={"teacher_sha256": "0" * 64} if name == "draft-small" else None)
    shutil.copytree(tmp_path / "draft-small", tmp_path / "draft-distilled")   # a stale teacher
    readme = card_mod.write_card(tmp_path, train_tokens=12345)
    c = json.loads((tmp_path / "card.json").read_text())
    assert set(c["models"]) == {"target", "draft-small", "draft-distilled"}
    assert c["models"]["target"]["epochs"] == pytest.approx(
        c["models"]["target"]["tokens_seen"] / 12345, abs=0.01)
    assert c["target_margin_nats"]["draft-small"] == pytest.approx(
        c["models"]["draft-small"]["validation_loss"] - c["models"]["target"]["validation_loss"])
    sums = manifest.read_sums(tmp_path)
    text = readme.read_text()
    assert all(f"{d}  {n}" in text for n, d in sums.items())
    assert "target/model.safetensors" in sums and "card.json" in sums
    assert "WARNING: its teacher (sha256 0000000000000000...) is not the committed target" in text
    monkeypatch.setattr(models, "MODELS_DIR", tmp_path)
    m = models.load_model("embedded")
    windows = card_mod.check_windows(tok)
    assert train.mean_loss(m, windows) == pytest.approx(c["models"]["target"]["check_nll"], abs=2e-3)


def test_the_cards_names_load_and_unknown_embedded_names_list_the_valid_ones(family):
    assert models.embedded_dir("draft-small") == models.embedded_dir("embedded-small") == "draft-small"
    assert models.embedded_dir("embedded") == "target" and models.embedded_dir("gpt2") is None
    m = models.load_model("draft-small")                               # the card's name, sha256-checked
    assert m.config.n_layer == 1 and set(m.weights_sha256) == {"model.safetensors"}
    assert m.weights_sha256["model.safetensors"] == manifest.read_sums(family)["draft-small/model.safetensors"]
    assert models.load_pair("embedded", "draft-small").draft.config.n_layer == 1
    with pytest.raises(ValueError, match="draft-distilled"):
        models.load_model("draft-large")                               # lists the family's names


def test_a_hub_id_in_the_local_cache_loads_offline_with_its_sha256(tmp_path, monkeypatch):
    """A hub id found in the Hugging Face cache (laid out as the hub client lays it out) loads with no
    network, safetensors only, and records the sha256 of the cached weight file."""
    snapshot = tmp_path / "hub" / "models--someone--tiny" / "snapshots" / ("a" * 40)
    _tiny(snapshot, 1)
    (tmp_path / "hub" / "models--someone--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hc
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    m = models.load_model("someone/tiny")
    assert m.config.n_layer == 1
    assert m.weights_sha256 == {"model.safetensors": manifest.sha256_file(snapshot / "model.safetensors")}


def test_models_load_from_several_threads_at_once():
    """transformers builds a model under process-wide meta-device patches; two threads loading at
    once failed ("Cannot copy out of meta tensor") in 3 of 3 tries without the loader's lock, as
    chapter 10's llama.cpp thread (writing its GGUF files) met our engine loading the target."""
    from concurrent.futures import ThreadPoolExecutor

    from specdec.family.loader import load_model

    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda m: load_model(m, dtype="float32"), ["target", "draft-distilled"] * 4))
    assert [m.config.n_layer for m in models[:2]] == [load_model("target").config.n_layer,
                                                     load_model("draft-distilled").config.n_layer]
