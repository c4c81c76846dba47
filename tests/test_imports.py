"""Every module of the project imports alone, in an interpreter of its own.

An import circle between modules hides as long as some other module happens
to be imported first; importing each module first, in a fresh interpreter,
finds it (``python -c "import lingjund.service.scheduling"`` once failed:
scheduling -> batch -> scheduling). A module that must not run at import
(a script) keeps its work behind ``if __name__ == "__main__"``; nothing is
skipped here.

Starting 130 interpreters, each importing grpc and protobuf again, takes
most of a minute on two cores. So one fresh interpreter imports the
third-party libraries only, checks that no module of ours is loaded yet, and
forks one child per module: each child starts with none of our modules and
imports its one, a few children at a time.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lingjun", "lingjund", "lingjun_agent", "lingjun_restd", "cli", "bench")
PARALLEL = 4

# Runs in a fresh interpreter: argv[1] is a JSON list of module names; prints
# a JSON object {module: traceback} of the modules that failed to import.
DRIVER = r"""
import json, os, sys, traceback
import grpc, google.protobuf  # third-party: not ours, shared by the children
mods, ours, parallel = json.loads(sys.argv[1]), tuple(json.loads(sys.argv[2])), int(sys.argv[3])
loaded = [m for m in sys.modules if m.split(".")[0] in ours]
assert not loaded, f"the driver loaded our modules: {loaded}"
failed, running = {}, {}

def reap():
    pid, status = os.wait()
    mod, r = running.pop(pid)
    with os.fdopen(r) as f:
        err = f.read()
    if os.waitstatus_to_exitcode(status) != 0:
        failed[mod] = err or f"exit status {status}"

for mod in mods:
    while len(running) >= parallel:
        reap()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            __import__(mod)
        except BaseException:
            os.write(w, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(w)
    running[pid] = (mod, r)
while running:
    reap()
print(json.dumps(failed))
"""


def modules() -> list[str]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(".".join(parts))
    return found


def import_each_alone(mods: list[str]) -> dict[str, str]:
    p = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(mods), json.dumps(PACKAGES),
                        str(PARALLEL)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def test_the_module_walk_finds_every_package():
    found = modules()
    assert "lingjund.service.scheduling" in found and "bench.sanity_drain" in found
    assert "lingjun_agent.network.__main__" in found and "lingjun.v1" in found


def test_a_module_that_fails_to_import_is_reported():
    failed = import_each_alone(["lingjun.slurm", "lingjund.service.no_such_module"])
    assert list(failed) == ["lingjund.service.no_such_module"]
    assert "ModuleNotFoundError" in failed["lingjund.service.no_such_module"]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    failed = import_each_alone(modules())
    assert not failed, "these modules do not import alone:\n\n" + "\n\n".join(
        f"{m}:\n{tb}" for m, tb in failed.items())
