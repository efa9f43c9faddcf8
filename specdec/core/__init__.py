"""The seed's equations as pure functions of tensors: sampling rules, verification, exact laws,
statistics, the cost model, acceptance statistics, toy models and the named wrong variants.
No model, cache, file or plot code (checked by import-linter)."""
