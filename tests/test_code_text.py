"""The library's docstrings and comments state contracts and reasons; what was measured on a day,
commit hashes and issue numbers belong to results, the book and git history.

The check is textual (patterns a measurement or a log entry leaves behind), so it is paired with a
planted source that must trip each pattern and a contract-like source that must pass.
"""
import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PATTERNS = {
    # 7-40 hex digits mixing letters and digits: a commit hash (digits alone are numbers)
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    # the project's own tracker ("issue 4"); another project's is cited with its repository and a
    # "#" ("vLLM issue #40551", "PR #16899"), the source of a claim about that software
    "an issue number": re.compile(r"\bissues? \d+", re.I),
    # an estimate followed by its interval: "1.010x [1.001, 1.023]"
    "a measured interval": re.compile(r"\d\.\d+x?,? \[[-+]?\d+\.\d+, [-+]?\d+\.\d+\]"),
    # a timing: "0.75 ms"
    "a timing": re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|µs)\b"),
}


def text_problems(source: str, name: str = "<source>") -> list[str]:
    """Each docstring or comment of `source` that matches a pattern, as "name:line: what (match)"."""
    pieces = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                pieces.append((node.body[0].lineno, doc))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            pieces.append((tok.start[0], tok.string))
    return [f"{name}:{line}: {what} ({m.group(0)!r})"
            for line, text in pieces for what, pat in PATTERNS.items() for m in pat.finditer(text)]


PLANTED = '''"""Runs at parity (1.010x [1.001, 1.023], commit 6d99a62)."""
def f():
    """See issue 4; a forward took 0.75 ms."""
    return 1  # fixed for issues 12 and 13
'''

CONTRACT = '''"""Sample x ~ p by inverse CDF: the first index whose cumulative sum exceeds u in [0, 1).

Example: p = [0.5, 0.5], u = 0.7 gives 1.  vLLM issue #40551 and llama.cpp issue #23544 are cited
by their repositories; 57004544 is a number, not a hash; a timeout of 30 s is a contract.
"""
def sample(p, u):
    return 0  # the guard of torch.multinomial's issue is not needed here
'''


def test_planted_log_entries_are_each_caught():
    found = " ".join(text_problems(PLANTED))
    for what in PATTERNS:
        assert what in found, what
    assert len(text_problems(PLANTED)) == 5


def test_contracts_and_cited_peer_issues_pass():
    assert text_problems(CONTRACT) == []


def test_library_docstrings_and_comments_hold_no_measurements_hashes_or_issue_numbers():
    problems = []
    for path in sorted((ROOT / "specdec").rglob("*.py")):
        problems += text_problems(path.read_text(), str(path.relative_to(ROOT)))
    assert problems == []


HISTORY = re.compile(r"gaps|issue_?\d+|regression_?\d+", re.I)  # a test file named after how it came about


def test_tests_are_named_and_documented_after_what_they_check_not_their_history():
    """A test file's name says what it checks; its docstrings and comments carry no issue number of
    this project (the tracker's history is git's).  Planted names must trip the check."""
    assert [n for n in ("test_engine_gaps.py", "test_issue12.py", "test_sampling.py") if HISTORY.search(n)] == [
        "test_engine_gaps.py", "test_issue12.py"]
    files = sorted((ROOT / "tests").rglob("*.py"))
    assert [str(p.relative_to(ROOT)) for p in files if HISTORY.search(p.name)] == []
    problems = []
    for path in files:
        if path.resolve() == Path(__file__).resolve():  # this file plants the patterns it checks
            continue
        problems += [p for p in text_problems(path.read_text(), str(path.relative_to(ROOT))) if "issue number" in p]
    assert problems == []
