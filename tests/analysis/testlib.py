"""Helpers shared by the analysis tests' Python scripts (tests/analysis/*.py).

- reporter(name, collect=None): the script's fail(msg) and check(cond, msg) (which returns
  cond). A failure
  prints "<name>: FAIL: <msg>" and exits 1, or, with a list as `collect`, is appended to it
  so that the script reports every failure before it exits.
- demangle(names): {name: demangled} by binutils' c++filt, a demangler independent of the
  C++ runtime's that the product uses; names that are not mangled stay as they are.

The scripts import it from their own folder (python3 puts a script's folder first on
sys.path, and a script imported by another one shares that folder).
"""
import subprocess
import sys


def reporter(name, collect=None):
    def fail(msg):
        print(name + ": FAIL:", msg)
        if collect is None:
            sys.exit(1)
        collect.append(msg)

    def check(cond, msg):
        if not cond:
            fail(msg)
        return cond

    return fail, check


def demangle(names):
    mangled = sorted(n for n in names if n.startswith("_Z"))
    out = {n: n for n in names}
    if mangled:
        p = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", stdout=subprocess.PIPE,
                           text=True, check=True)
        out.update(zip(mangled, p.stdout.split("\n")))
    return out
