"""Chapter 09's workload on vLLM's real server (`make engines`, `specdec.cli.serving_vllm`): which of
chapter 10's vLLM configurations are served, under which names, and the servers started together
and always stopped.

Protocol, stated before any result: every server of the run is started first (all at once, each
one thread, its log kept) and stopped in a ``finally`` (`started`); the plain server is the
baseline.  The configurations are chapter 10's (`specdec.audit.design.plan`, by label), and each
carries chapter 10's verdict at the run's sampling setting (`law_status`, read from its committed
laws table): one whose law test rejected is run only under a name marked "not the target's law
here" (`policy_name`), and its rows' verdicts say so instead of faster or slower (`labelled`).
"""
from __future__ import annotations

import csv
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from specdec.audit.design import Config, plan
from specdec.io.paths import CHAPTERS, RESULTS_DIR
from specdec.report.robustness import NOT_EXACT

__all__ = ["configs", "law_status", "policy_name", "law_of", "label_of", "labelled_configs", "started", "labelled",
           "LAWS", "MIN_VERIFIED"]

LAWS = RESULTS_DIR / CHAPTERS["eng"] / "laws.csv"  # chapter 10's committed law tests


def configs(labels, k: int, draft: str) -> list[Config]:
    """Chapter 10's vLLM configurations with these labels, in the given order (a label the plan
    lacks is an error that lists the plan's)."""
    by = {c.label: c for c in plan(k, draft) if c.engine == "vllm" and c.role == "speculative"}
    missing = [x for x in labels if x not in by]
    if missing:
        raise ValueError(f"not vLLM configurations of chapter 10's plan: {missing}; it has {sorted(by)}")
    return [by[x] for x in labels]


MIN_VERIFIED = 0.9  # a pass counts only when this share of its samples went through a drafted verification


def law_status(laws_csv: Path, cfgs: list[Config], setting: str) -> dict:
    """label -> chapter 10's law-test status at ``setting``: "reject", "pass" (only where at least
    MIN_VERIFIED of the row's samples went through a verification that carried drafts: a pass on
    samples the drafter never drafted says nothing of its verification), else "not tested" (no
    such row, a row the build ignored, or a pass on too few verified samples)."""
    rows = list(csv.DictReader(Path(laws_csv).read_text().splitlines())) if Path(laws_csv).exists() else []

    def status(r) -> str:
        if r["status"] == "reject":
            return "reject"
        share = float(r.get("verified_share") or "nan")
        return "pass" if r["status"] == "pass" and share >= MIN_VERIFIED else "not tested"

    got = {r["configuration"]: status(r) for r in rows if r["engine"] == "vllm" and r["setting"] == setting}
    return {c.label: got.get(c.label, "not tested") for c in cfgs}


MARKS = {"reject": f" ({NOT_EXACT})", "not tested": " (law not tested)"}  # a policy name's mark, by law status
LAW_WORDS = {"reject": "rejected", "not tested": "not tested", "pass": "passed"}  # a law status on the page


def policy_name(cfg: Config, status: str) -> str:
    """The policy's name: vLLM's configuration, marked where chapter 10 rejected it or did not test it
    (`MARKS`), so that no row of the run reads as the target's law without chapter 10's pass."""
    return f"vLLM {cfg.label}{MARKS.get(status, '')}"


def law_of(policy: str) -> str:
    """The law status a policy name carries (`policy_name`'s mark), as the page says it (`LAW_WORDS`).
    Example: law_of("vLLM draft model, k = 2 (not the target's law here)") -> "rejected"."""
    return LAW_WORDS[next((s for s, m in MARKS.items() if policy.endswith(m)), "pass")]


def label_of(policy: str) -> str:
    """The configuration's label in a policy name, without the "vLLM " prefix and the law mark.
    Example: label_of("vLLM n-gram prompt lookup, k = 2 (law not tested)") -> "n-gram prompt lookup, k = 2"."""
    mark = next((m for m in MARKS.values() if policy.endswith(m)), "")
    return policy.removeprefix("vLLM ").removesuffix(mark)


def labelled_configs(labels, k: int, draft: str, temperature: float, laws_csv: Path = LAWS) -> dict:
    """policy name -> (configuration, chapter 10's law status at this temperature): the plan's
    configurations with these labels, each named by `policy_name`."""
    cfgs = configs(labels, k, draft)
    status = law_status(laws_csv, cfgs, "temperature 1" if temperature == 1.0 else f"temperature {temperature:g}")
    return {policy_name(c, status[c.label]): (c, status[c.label]) for c in cfgs}


@contextmanager
def started(servers: dict):
    """Enter every server of ``servers`` (name -> an unstarted server: `VLLMServer` or any object with
    ``__enter__`` and ``stop``) at once, yield them, and stop every one on the way out, whichever
    failed to start: a failed start re-raises after the others are stopped."""
    with ExitStack() as stack:
        for s in servers.values():
            stack.callback(s.stop)
        with ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
            futures = [pool.submit(s.__enter__) for s in servers.values()]
        for f in futures:
            f.result()
        yield servers


def labelled(speed: list[dict], labelled_cfgs: dict) -> list[dict]:
    """The speedup rows, a configuration outside the target's law (or not shown to keep it) read as
    such, never as faster."""
    bad = {name for name, (_, status) in labelled_cfgs.items() if status != "pass"}
    return [{**r, "verdict": NOT_EXACT, "verdict_sim": NOT_EXACT} if r["policy"] in bad else r for r in speed]
