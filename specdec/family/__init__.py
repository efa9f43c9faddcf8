"""The embedded model family: corpus, tokenizer, architectures, training, model card, n-gram model,
checksums, and the one loader every model load goes through."""
