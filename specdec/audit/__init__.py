"""Holding an engine to the exact target law: which configurations are tested and the negative
controls that must fail (`design`), the prompts chosen so that every drafter drafts (`prompts`),
the staged runs (`runs`), the law of the first two tokens (`law`), every position of long outputs
(`pit_rows`), paired timing (`speed`) and the tables they make (`tables`).  Chapter 10 presents
them; the engines themselves are `specdec.peers`'."""
