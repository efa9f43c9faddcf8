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


# --- no library function writes the page's sentences ----------------------------------------------
# A name that announces prose, and the number and label formatters that may keep a "_text" name.
PROSE_NAME = re.compile(r"words|sentence|headline|caption|finding|prose|_text$")
FORMATTERS = {"config_text", "temperature_text", "detect_text", "p_value_text", "fraction_text", "table_text",
              "as_text", "machine_text", "split_text", "load_text", "_probs_text"}
SENTENCE_WORDS = 8  # a string literal with this many words is a sentence (labels and states are shorter)
ERROR_CALLS = {"warn", "error", "exit", "add_argument", "ArgumentParser", "SystemExit", "ValueError", "TypeError",
               "RuntimeError", "KeyError", "FileNotFoundError"}


def prose_problems(source: str, name: str = "<source>") -> list[str]:
    """Each function of `source` named like a sentence builder (outside `FORMATTERS`), and each
    string literal (an f-string's literal parts joined) of `SENTENCE_WORDS` or more words outside a
    docstring, a `raise`, an `assert` or an error or argparse call: the page's sentences belong in
    the notebooks' markdown."""
    tree = ast.parse(source)
    skip, out = set(), []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
                skip.add(id(n.body[0].value))
            if not isinstance(n, ast.Module) and PROSE_NAME.search(n.name) and n.name not in FORMATTERS:
                out.append(f"{name}:{n.lineno}: a sentence builder's name ({n.name})")
        called = n.func.attr if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) else \
            n.func.id if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) else None
        if isinstance(n, (ast.Raise, ast.Assert)) or called in ERROR_CALLS:
            skip |= {id(m) for m in ast.walk(n)}
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.JoinedStr):
            skip |= {id(v) for v in n.values}
            text = " ".join(v.value for v in n.values if isinstance(v, ast.Constant))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            text = n.value
        else:
            continue
        text = re.sub(r"\{[^{}]*\}|`[^`]*`", " ", text)  # MyST roles and directives, code: markup
        if len(re.findall(r"[A-Za-z]{2,}", text)) >= SENTENCE_WORDS:
            out.append(f"{name}:{n.lineno}: a sentence ({text[:50]!r})")
    return out


PROSE_PLANTED = '''"""A module docstring may say as much as it likes about what this module is for and why."""
def headline(x):
    return f"the fastest drafter measured {x} times faster than plain decoding here"
def verdict(lo):
    if lo != lo:
        raise ValueError("a missing bound cannot be turned into a verdict by this function at all")
    return "faster" if lo > 1 else "undecided"
'''


def test_a_planted_sentence_builder_is_caught_and_states_errors_and_docstrings_pass():
    found = prose_problems(PROSE_PLANTED)
    assert len(found) == 2 and "headline" in found[0] and "a sentence" in found[1]
    assert prose_problems(PROSE_PLANTED.split("def headline")[0] + "def verdict(lo):\n    return 'undecided'\n") == []


def test_no_library_function_returns_a_sentence():
    """Sentence-builder names nowhere in specdec; sentence literals nowhere in the layers that make
    pages (chapters, report) but the plots' axis labels and titles."""
    problems = []
    for path in sorted((ROOT / "specdec").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        found = prose_problems(path.read_text(), name)
        if path.parent.name == "plotting" or not {"chapters", "report"} & set(path.parts):
            found = [p for p in found if "sentence builder" in p]
        problems += found
    assert problems == []
