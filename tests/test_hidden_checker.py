"""Nothing to read, nothing to detect: the learner's process holds none of the checker's
expectations and looks like a plain ``python -c`` program that imported the file.

For each channel, a learner file searches it and must find nothing, and a file
that "behaves only when checked" (right when it detects the checker, wrong
otherwise) must fail. What stays visible, and why, is in
``trainer/checking/learner/serve.py`` (``look_plain``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import CATALOG, shared_service
from trainer.checking.runner import CheckingService, HostLimits, run_check


@pytest.fixture
def service() -> CheckingService:
    return shared_service()  # the worker's warm server: each check forks a fresh learner


# Each probe returns a list of what it found of the checker.
PROBES = {
    "gc": """
        import gc
        # Built at run time, so that this file's own constants do not match.
        names = {n.upper() for n in ["plan", "run", "kinkrun", "checked", "channel", "exercise"]}
        keys = {"_".join(p) for p in [("expected", "grads"), ("expected", "outputs"), ("to", "ken")]}
        title = " ".join(["hand-written", "backward"])  # from the spec's title, not in this file
        found = sorted({type(o).__name__ for o in gc.get_objects() if type(o).__name__.upper() in names})
        found += [k for o in gc.get_objects() if isinstance(o, dict) for k in list(o)[:50] if k in keys]
        # Not platform's uname result: iterating it runs `uname -p` (a process: refused).
        found += ["spec text" for o in gc.get_objects() if isinstance(o, (list, tuple, dict))
                  and type(o).__name__ != "uname_result"
                  and any(isinstance(v, str) and title in v
                          for v in (o.values() if isinstance(o, dict) else o))]
        return found
    """,
    "class modules": """
        import gc
        return sorted({t.__module__ for t in gc.get_objects()
                       if isinstance(t, type) and "trainer" in str(t.__module__)})
    """,
    "functions": """
        import functools, gc, os, types
        cached = type(functools.cache(len))
        found = set()
        for f in gc.get_objects():
            if isinstance(f, types.FunctionType):
                module, file = str(f.__module__), f.__code__.co_filename
            elif isinstance(f, cached):
                module, file = str(getattr(f, "__module__", "")), ""
            else:
                continue
            if module.split(".")[0] == "trainer" or f"{os.sep}trainer{os.sep}" in file:
                found.add(f"{module} {file}")
        return sorted(found)
    """,
    "sys.modules": """
        import sys
        return [n for n in sys.modules if "trainer" in n or "checking" in n]
    """,
    "environment": """
        import os
        return [k for k in os.environ if "TRAINER" in k.upper()]
    """,
    "sys.argv": """
        import sys
        return [a for a in sys.argv if "trainer" in a or "check" in a]
    """,
    "module name": """
        return [] if __name__ == "sigmoid" else [__name__]
    """,
    "call stack": """
        import sys
        found, frame = [], sys._getframe()
        while frame is not None:  # inspect.stack() would read every file: too slow here
            name = str(frame.f_globals.get("__name__"))
            if "trainer" in frame.f_code.co_filename or "trainer" in name:
                found.append(frame.f_code.co_filename)
            frame = frame.f_back
        return found
    """,
    "parent command line": """
        import os
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            line = handle.read().decode(errors="replace")
        return [line] if "trainer" in line or "checking" in line else []
    """,
}
# Protections left out for a probe: Landlock hides other processes' /proc anyway, the
# PID namespace hides the parent itself, and the command line must not tell the
# checker's processes apart where they do not.
LEFT_OUT = {"parent command line": ("files", "processes")}


def _probe_function(name: str) -> str:
    """``probe()``: the search, run once (a search of gc is slow) and remembered."""
    body = textwrap.indent(textwrap.dedent(PROBES[name]).strip(), "    ")
    return (
        f"def search():\n{body}\n\n\nSEEN = []\n\n\n"
        "def probe():\n    if not SEEN:\n        SEEN.append(search())\n    return SEEN[0]\n"
    )


HEADER = "import json\nimport torch\n\n"
LEARNER = """

class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        found = probe()
        {action}
"""


def _check(service: CheckingService, tmp_path: Path, source: str, channel: str) -> tuple[bool, str]:
    path = tmp_path / "sigmoid.py"  # the module name a plain `import sigmoid` gives
    path.write_text(source, encoding="utf-8")
    limits = HostLimits(skip=LEFT_OUT.get(channel, ()))
    report = run_check(CATALOG.get("sigmoid"), path, service=service, limits=limits)
    return report.passed, report.output


@pytest.mark.parametrize("channel", list(PROBES))
def test_a_learner_searching_a_channel_finds_nothing_of_the_checker(service, tmp_path, channel):
    action = (
        'print("FOUND", json.dumps(found), flush=True)\n        return grad_output * y * (1 - y)'
    )
    source = HEADER + _probe_function(channel) + LEARNER.format(action=action)
    passed, output = _check(service, tmp_path, source, channel)
    findings = [
        json.loads(line.split(" ", 1)[1])
        for line in output.splitlines()
        if line.startswith("FOUND ")
    ]
    assert findings, output[-2000:]
    assert all(found == [] for found in findings), findings[:3]
    assert passed


@pytest.mark.parametrize("channel", list(PROBES))
def test_a_file_that_behaves_only_when_it_detects_the_checker_fails(service, tmp_path, channel):
    action = "return grad_output * y * (1 - y) if found else grad_output * 0.25"
    source = HEADER + _probe_function(channel) + LEARNER.format(action=action)
    passed, _ = _check(service, tmp_path, source, channel)
    assert not passed


@pytest.mark.filterwarnings("ignore::FutureWarning")  # gc meets torch's deprecated names
@pytest.mark.parametrize(
    "channel", ["gc", "class modules", "functions", "sys.modules", "environment", "module name"]
)
def test_the_probes_are_not_blind_where_the_checker_is_in_plain_sight(
    channel, tmp_path, monkeypatch
):
    """Each probe, run in this test process (which holds the checker's modules, a plan,
    and TRAINER_WORKSPACE in its environment), finds what it looks for."""
    from trainer.checking.trusted.plan import build_plan

    plan = build_plan(CATALOG.get("sigmoid"), 0)  # a plan in memory, for the gc probe
    monkeypatch.setenv("TRAINER_WORKSPACE", str(tmp_path))  # as the CLI's environment may
    namespace: dict[str, object] = {"__name__": "probe"}
    exec(compile(HEADER + _probe_function(channel), "probe.py", "exec"), namespace)
    assert namespace["probe"](), channel  # type: ignore[operator]
    assert plan is not None


def test_the_zygotes_walk_from_the_modules_finds_every_function_and_class_gc_holds():
    """The zygote renames what it finds by walking the trainer's modules (a walk of all of
    gc's objects cost ~50 ms on the way to every first check). In a fresh interpreter
    with every module of ours imported (more than a zygote has), the walk must find all
    that gc finds; a kind of place it does not look (a closure, a cached_property, a
    ctypes array class) fails here. Fresh: a test process that ran the CLI also holds
    typer's wrappers of our commands, which no zygote ever makes."""
    script = textwrap.dedent(
        """
        import functools, gc, importlib, json, pkgutil, sys, types, warnings, weakref
        import trainer
        from trainer.checking.learner import serve

        for module in pkgutil.walk_packages(trainer.__path__, "trainer."):
            if module.name not in ("trainer.__main__", "trainer.bench"):
                importlib.import_module(module.name)
        names = {n for n in sys.modules if n == "trainer" or n.startswith("trainer.")}
        cached = type(functools.cache(len))
        in_gc = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for found in gc.get_objects():
                if type(found) in weakref.ProxyTypes:  # ctypes' cache: the class, renamed
                    continue
                kind_of_ours = isinstance(found, (type, types.FunctionType, cached))
                if kind_of_ours and getattr(found, "__module__", None) in names:
                    in_gc.append(found)
        walked = {id(x) for kind in serve._found_from(names) for x in kind}
        missed = [f"{x.__module__}.{x.__qualname__}" for x in in_gc if id(x) not in walked]
        print(json.dumps({"in_gc": len(in_gc), "missed": missed}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["in_gc"] > 1000
    assert found["missed"] == []
