"""Run a generated Classroom workflow's install and check steps here, as a runner would.

    .venv/bin/python tools/classroom_proof.py [WORK_FOLDER]

`trainer classroom init sigmoid` (this checkout's trainer) writes a template
repository; the stubs go in as the README's recipe says. Four students' copies
hold a right, a wrong, an untouched and a symlinked sigmoid.py. In a clean
virtual environment (python3 -m venv, nothing else in it), the workflow's install
steps run verbatim (bash -e): torch, then the trainer from the wheel file in the
repository; there is no index entry for autograd-trainer. Then each student's
sigmoid step runs verbatim, and its result is decoded as Classroom's reporter
does. Slow (installs torch): not part of `make test`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
TRAINER = REPO / ".venv" / "bin" / "trainer"


def run(command: list[str] | str, cwd: Path, env: dict[str, str], shell: bool = False) -> str:
    done = subprocess.run(
        ["bash", "-e", "-c", command] if shell else command,
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {command}\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def main() -> None:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="classroom-"))
    work.mkdir(parents=True, exist_ok=True)
    clean = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    for name in ("PIP_FIND_LINKS", "PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
        if name in os.environ:
            clean[name] = os.environ[name]
    template = work / "template"
    template.mkdir()
    print(run([str(TRAINER), "classroom", "init", "sigmoid"], template, clean).rstrip())
    run([str(TRAINER), "start", "sigmoid"], template, clean)
    steps = yaml.safe_load((template / ".github/workflows/classroom.yml").read_text())
    steps = steps["jobs"]["run-autograding-tests"]["steps"]

    venv = work / "runner-venv"
    started = time.monotonic()
    run(["python3", "-m", "venv", str(venv)], work, clean)
    runner = {**clean, "PATH": f"{venv / 'bin'}:{clean['PATH']}", "VIRTUAL_ENV": str(venv)}
    probe = subprocess.run(
        [str(venv / "bin/pip"), "download", "--no-deps", "-d", str(work / "probe"),
         "autograd-trainer"], capture_output=True, text=True, env=runner, check=False,
    )  # fmt: skip
    print(
        f"$ pip download autograd-trainer  -> exit {probe.returncode}: "
        f"{probe.stderr.strip().splitlines()[-1]}"
    )
    for step in steps:
        if step.get("name", "").startswith("Install"):
            print(f"# step {step['name']!r}:\n{step['run'].rstrip()}")
            run(step["run"], template, runner, shell=True)
    print(f"installed in {time.monotonic() - started:.0f} s")
    where = run(
        [
            str(venv / "bin/python"),
            "-c",
            "import trainer, importlib.metadata as m; "
            "print(trainer.__file__, m.version('autograd-trainer'))",
        ],
        work,
        runner,
    )
    print(f"trainer comes from: {where.strip()}")
    step = next(s for s in steps if s.get("id") == "sigmoid")

    right = (REPO / "solutions" / "sigmoid.py").read_text()
    wrong = right.replace("grad_output * output * (1 - output)", "output * (1 - output)")
    installed = run(
        [
            str(venv / "bin/python"),
            "-c",
            "from trainer.catalog import solution_path, Catalog; "
            "print(solution_path(Catalog.default().get('sigmoid')))",
        ],
        work,
        runner,
    )
    students = {"right": right, "wrong": wrong, "stub": None, "symlinked": Path(installed.strip())}
    for name, content in students.items():
        repo = work / name
        shutil.copytree(template, repo, symlinks=True)
        scratch = repo / "trainer-workspace" / "sigmoid.py"
        if isinstance(content, str):
            scratch.write_text(content)
        elif isinstance(content, Path):
            scratch.unlink()
            scratch.symlink_to(content)
        output = repo / "github-output"
        output.write_text("")
        run(step["run"], repo, {**runner, "GITHUB_OUTPUT": str(output)}, shell=True)
        (line,) = output.read_text().splitlines()
        result = json.loads(base64.b64decode(line.partition("=")[2]))
        score = sum(test["score"] for test in result["tests"])
        flags = [f"{f['kind']} -> {f['matched']}" for f in result.get("flags", [])]
        print(
            f"{name:>9}: {result['status']:5} {score:2}/{result['max_score']}"
            + (f"  flags: {', '.join(flags)}" if flags else "")
        )


if __name__ == "__main__":
    main()
