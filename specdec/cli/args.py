"""What the command lines that talk to a deployment share: usage errors as ONE line on stderr and
exit status 2 (no traceback), and the prompts they send.

Prompts: the embedded family's held-out prompts as token ids (valid ids for any vocabulary of at
least the embedded one's size; the text they spell in another tokenizer is not the same), or a
prompt file: a JSON list of non-empty token-id lists in the deployed model's own vocabulary
(`specdec.peers.contract.check_prompts`; the deployed model judges the ids against its vocabulary).

Example: parser = Parser("audit", prog="python -m specdec.cli.audit"); ...; prompts("audit", None, 4, 8, 0)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

from specdec.peers.contract import check_prompts

__all__ = ["UsageError", "Parser", "usage", "prompts"]


class UsageError(SystemExit):
    """A usage error: exit status 2 (as argparse's own) after ONE line on stderr.  The exception
    carries the line too (``str(exc)``), for a caller of a ``main`` in the same process."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = 2  # the interpreter exits with this status and prints nothing more


def usage(tool: str, message: str) -> NoReturn:
    """Print ``tool: message`` and raise `UsageError` (a command line's only exit on a usage error)."""
    print(f"{tool}: {message}", file=sys.stderr)
    raise UsageError(message)


class Parser(argparse.ArgumentParser):
    """argparse, its errors (an unknown option, "abc" for a number) as one-line `UsageError`s."""

    def __init__(self, tool: str, **kw):
        super().__init__(**kw)
        self.tool = tool

    def error(self, message):
        usage(self.tool, f"{message} (see --help)")


def prompts(tool: str, prompt_file, count: int, prompt_len: int, seed: int) -> list[list[int]]:
    """The prompts a deployment is sent (module docstring); a usage error names a bad file."""
    if prompt_file:
        path = Path(prompt_file)
        try:
            text = path.read_text()
        except FileNotFoundError:
            usage(tool, f"--prompt-file {path}: no such file")
        except (OSError, UnicodeDecodeError) as exc:
            usage(tool, f"--prompt-file {path}: cannot be read ({exc})")
        try:
            ids = json.loads(text)
        except ValueError as exc:
            usage(tool, f"--prompt-file {path} is not JSON ({exc}): expected a JSON list of token-id lists")
        try:
            return check_prompts(ids)
        except (TypeError, ValueError) as exc:
            usage(tool, f"--prompt-file {path}: {exc}: expected a JSON list of non-empty token-id lists")
    from specdec.family.loader import load_tokenizer
    from specdec.family.tokens import heldout_prompts

    return heldout_prompts(load_tokenizer("embedded"), n=count, prompt_len=prompt_len, seed=seed).tolist()
