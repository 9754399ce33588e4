"""Benchmarks for the speed targets, each against its baseline in the same run.

Run: ``python -m trainer.bench`` (``--repeat N`` for more runs). Prints medians,
ratios and whether each target is met; exits 1 when one is not.

1. ``trainer hint sigmoid`` vs ``python -c "import typer, rich, yaml"`` (≤ 1.5×).
2. ``trainer check`` on a correct solution vs ``python -c "import torch"``:
   time ≤ 1.2× and peak memory ≤ 1.3× (the largest process of the check).
3. Re-check in watch mode from a warm worker: from saving the file to the
   verdict, for sigmoid (≤ 0.2 s).
4. ``trainer validate`` over the whole catalogue: wall time per exercise (≤ 0.85 s on
   two cores), and how busy the cores were.
5. Re-check in a notebook: ``%%trainer check sigmoid`` of an edited cell on the
   kernel's warm checking server, from the cell's run to the report (≤ 0.3 s).
7. With ``--grade N``: ``trainer grade`` over N generated submissions of sigmoid (right,
   wrong, hanging and crashing files), on every core with the warm worker: wall time
   per submission (≤ 0.3 s), and every submission graded as it should be.
6. With ``--report-lines``: the length of a failing ``trainer check`` report at 80
   columns, over every bundled wrong variant (median ≤ 40 lines: one screen).
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.catalog import Catalog, solution_path


@dataclass
class Sample:
    seconds: float
    peak_kib: int  # the largest resident set of the process tree


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> Sample:
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"benchmark command failed ({process.returncode}): {' '.join(argv)}")
    # ru_maxrss of a reaped child covers its own reaped children too (Linux: KiB).
    return Sample(elapsed, int(usage.ru_maxrss))


def _median(samples: list[Sample]) -> tuple[float, int]:
    return (
        statistics.median(s.seconds for s in samples),
        int(statistics.median(s.peak_kib for s in samples)),
    )


def _trainer() -> list[str]:
    """The installed console script, as a learner runs it; `python -m trainer` without one."""
    script = Path(sys.executable).with_name("trainer")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "trainer"]


@dataclass
class Row:
    target: str
    measured: str
    baseline: str
    ratio: str
    limit: str
    met: bool


def bench_startup(repeat: int, workdir: Path, env: dict[str, str]) -> list[Row]:
    _run([*_trainer(), "hint", "sigmoid"], workdir, env)  # warm-up: writes bytecode caches
    baseline = _median(
        [
            _run([sys.executable, "-c", "import typer, rich, yaml"], workdir, env)
            for _ in range(repeat)
        ]
    )
    hint = _median([_run([*_trainer(), "hint", "sigmoid"], workdir, env) for _ in range(repeat)])
    ratio = hint[0] / baseline[0]
    return [
        Row(
            "1. trainer hint sigmoid (time)",
            f"{hint[0] * 1000:.0f} ms",
            f"{baseline[0] * 1000:.0f} ms (import typer, rich, yaml)",
            f"{ratio:.2f}×",
            "≤ 1.5×",
            ratio <= 1.5,
        )
    ]


def bench_check(repeat: int, workdir: Path, env: dict[str, str]) -> list[Row]:
    exercise = Catalog.default().get("sigmoid")
    solution = solution_path(exercise)
    _run([*_trainer(), "check", "sigmoid", "--file", str(solution)], workdir, env)  # warm-up
    torch_import = _median(
        [_run([sys.executable, "-c", "import torch"], workdir, env) for _ in range(repeat)]
    )
    check = _median(
        [
            _run([*_trainer(), "check", "sigmoid", "--file", str(solution)], workdir, env)
            for _ in range(repeat)
        ]
    )
    time_ratio = check[0] / torch_import[0]
    memory_ratio = check[1] / torch_import[1]
    return [
        Row(
            "2. trainer check, correct sigmoid (time)",
            f"{check[0]:.2f} s",
            f"{torch_import[0]:.2f} s (import torch)",
            f"{time_ratio:.2f}×",
            "≤ 1.2×",
            time_ratio <= 1.2,
        ),
        Row(
            "2. trainer check (peak memory)",
            f"{check[1] / 1024:.0f} MiB",
            f"{torch_import[1] / 1024:.0f} MiB (import torch)",
            f"{memory_ratio:.2f}×",
            "≤ 1.3×",
            memory_ratio <= 1.3,
        ),
    ]


def bench_watch(repeat: int, workdir: Path) -> list[Row]:
    """From a save to the verdict, through the real watch loop and a warm worker."""
    from trainer.checking.runner import CheckingService, run_check
    from trainer.watch import watch_loop

    exercise = Catalog.default().get("sigmoid")
    scratch = workdir / "watched" / "sigmoid.py"
    scratch.parent.mkdir(exist_ok=True)
    source = solution_path(exercise).read_text(encoding="utf-8")
    scratch.write_text(source, encoding="utf-8")
    latencies: list[float] = []
    saved_at: list[float] = []
    done = threading.Event()
    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    with CheckingService() as warm:

        def on_change() -> None:
            report = run_check(exercise, scratch, service=warm, solution=solution_path(exercise))
            if not report.passed:
                raise SystemExit("the watched solution did not pass")
            if saved_at:
                latencies.append(time.perf_counter() - saved_at[-1])
            done.set()

        runner = threading.Thread(
            target=watch_loop, args=(lambda: scratch, on_change, lambda _k: True, keys, stop)
        )
        runner.start()
        done.wait(timeout=60)
        for index in range(repeat):
            done.clear()
            time.sleep(0.3)  # a learner does not save twice in a blink
            saved_at.append(time.perf_counter())
            scratch.write_text(source + f"\n# save {index}\n", encoding="utf-8")
            done.wait(timeout=30)
        stop.set()
        runner.join(timeout=5)
    median = statistics.median(latencies)
    return [
        Row(
            "3. watch: save → verdict, warm worker",
            f"{median:.3f} s",
            "–",
            "–",
            "≤ 0.2 s",
            median <= 0.2,
        )
    ]


def bench_notebook(repeat: int, workdir: Path) -> list[Row]:
    """What ``%%trainer check`` does after the first check of a kernel: save the cell as the
    scratch file (backing up the previous one), check it on the warm server, count it."""
    from trainer.api import check_cell, close_service
    from trainer.session import Session

    session = Session(workdir / "notebook-ws")
    exercise = session.catalog.get("sigmoid")
    source = solution_path(exercise).read_text(encoding="utf-8")
    latencies: list[float] = []
    try:
        check_cell(session, exercise, source)  # the kernel's first check starts the server
        for index in range(repeat):
            started = time.perf_counter()
            report, _ = check_cell(session, exercise, source + f"\n# edit {index}\n")
            latencies.append(time.perf_counter() - started)
            if not report.passed or not report.warm:
                raise SystemExit("the notebook re-check did not pass on the warm server")
    finally:
        close_service()
    median = statistics.median(latencies)
    return [
        Row(
            "5. notebook: %%trainer check re-check, warm",
            f"{median:.3f} s",
            "–",
            "–",
            "≤ 0.3 s",
            median <= 0.3,
        )
    ]


def bench_validate(workdir: Path, env: dict[str, str]) -> list[Row]:
    cores = os.cpu_count() or 1
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sample = _run([*_trainer(), "validate"], workdir, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    busy = cpu / (sample.seconds * cores)
    count = len(Catalog.default().spec_paths())
    each = sample.seconds / count
    limit = 0.85  # an exercise, on two cores (the target's machine)
    return [
        Row(
            f"4. trainer validate, {count} exercises",
            f"{sample.seconds:.1f} s wall ({each:.2f} s each), {cpu:.1f} s CPU",
            f"{cores} cores",
            f"{busy:.0%} busy",
            f"≤ {limit:.2f} s each",
            each <= limit and busy >= 0.75,
        )
    ]


def bench_report_lines() -> list[Row]:
    """Check every bundled wrong variant (one warm service) and count the lines of its
    report as `trainer check` prints it at 80 columns."""
    from trainer import console
    from trainer.catalog import wrong_variant_path
    from trainer.checking.runner import CheckingService, run_check

    catalog = Catalog.default()
    counts = []
    with CheckingService() as service:
        for exercise in catalog.all:
            for variant in exercise.wrong_variants:
                path = wrong_variant_path(exercise, variant.file)
                report = run_check(
                    exercise,
                    path,
                    solution=solution_path(exercise),
                    service=service,
                    catalogue_file=True,
                )
                if report.passed:
                    continue
                with console.captured(width=80) as text:
                    console.check_report(report, exercise)
                counts.append(text.getvalue().count("\n"))
    median = statistics.median(counts)
    p90 = sorted(counts)[int(0.9 * (len(counts) - 1))]
    fits = sum(c <= 40 for c in counts)
    return [
        Row(
            f"5. failing report at 80 columns, {len(counts)} wrong variants",
            f"median {median:g} lines, p90 {p90}, max {max(counts)}",
            f"{fits} of {len(counts)} ≤ 40 lines",
            "–",
            "median ≤ 40",
            median <= 40,
        )
    ]


# What the generated class holds, by place: 1% hang, 4% crash, a quarter wrong.
_HANG = "        while True:\n            pass\n"
_CRASH = "        import os\n        os._exit(3)\n"
GRADE_TIMEOUT = 5.0


def _submission(index: int, right: str) -> tuple[str, str]:
    """Submission ``index`` of a generated class: its source and what it should get."""
    marker = "(output,) = ctx.saved_tensors\n"
    signed = f"# submission {index}\n" + right  # every file differs (its own sha256)
    if index % 100 == 0:
        return signed.replace(marker, marker + _HANG), "hang"
    if index % 25 == 1:
        return signed.replace(marker, marker + _CRASH), "crash"
    if index % 4 == 2:
        wrong = ("output * (1 - output)", "grad_output * output", "grad_output * (1 - output)")
        return signed.replace("grad_output * output * (1 - output)", wrong[index % 3]), "wrong"
    return signed, "right"


def bench_grade(count: int, workdir: Path, env: dict[str, str]) -> list[Row]:
    """``trainer grade`` over ``count`` generated submissions; a wrong verdict fails the row."""
    import json

    right = solution_path(Catalog.default().get("sigmoid")).read_text()
    folder = workdir / "class"
    folder.mkdir()
    expected = {}
    for index in range(count):
        source, kind = _submission(index, right)
        path = folder / f"s{index:05d}.py"
        path.write_text(source)
        expected[str(path)] = kind
    command = [*_trainer(), "grade", "sigmoid", str(folder), "--json"]
    command += ["--timeout", str(GRADE_TIMEOUT)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"grade failed ({done.returncode}): {done.stderr[-2000:]}")
    grades = json.loads(done.stdout)["grades"]
    wrong_verdicts = [
        g["submission"]
        for g in grades
        if (g["verdict"] == "pass") != (expected[g["submission"]] == "right")
        or (expected[g["submission"]] == "hang" and "timed out" not in g["message"])
    ]
    kinds = [expected[g["submission"]] for g in grades]
    mix = ", ".join(f"{kinds.count(k)} {k}" for k in ("right", "wrong", "hang", "crash"))
    each = elapsed / count
    return [
        Row(
            f"7. trainer grade, {count} submissions ({mix})",
            f"{elapsed:.1f} s wall, {each:.3f} s each",
            f"{len(grades)} graded, {len(wrong_verdicts)} wrong verdicts",
            f"timeout {GRADE_TIMEOUT:g} s",
            "≤ 0.3 s each, every one right",
            each <= 0.3 and len(grades) == count and not wrong_verdicts,
        )
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=7, help="runs per measurement (median)")
    parser.add_argument("--skip-validate", action="store_true", help="skip the slowest target")
    parser.add_argument(
        "--only",
        choices=["startup", "check", "watch", "notebook", "validate"],
        action="append",
        help="run only these targets (repeatable)",
    )
    parser.add_argument(
        "--report-lines",
        action="store_true",
        help="also measure failing reports at 80 columns (checks every wrong variant)",
    )
    parser.add_argument(
        "--grade",
        type=int,
        metavar="N",
        default=0,
        help="also grade N generated submissions (right, wrong, hanging, crashing)",
    )
    options = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="trainer-bench-"))
    env = {**os.environ, "TRAINER_WORKSPACE": str(workdir / "ws")}
    # Measure what a learner sees from the second run on: compiled bytecode
    # cached, as Python does unless told not to (this machine's environment does).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        wanted = set(options.only or ["startup", "check", "watch", "notebook", "validate"])
        if options.skip_validate:
            wanted.discard("validate")
        rows: list[Row] = []
        if "startup" in wanted:
            rows += bench_startup(options.repeat, workdir, env)
        if "check" in wanted:
            rows += bench_check(options.repeat, workdir, env)
        if "watch" in wanted:
            rows += bench_watch(options.repeat, workdir)
        if "notebook" in wanted:
            rows += bench_notebook(options.repeat, workdir)
        if "validate" in wanted:
            rows += bench_validate(workdir, env)
        if options.report_lines:
            rows += bench_report_lines()
        if options.grade:
            rows += bench_grade(options.grade, workdir, env)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    width = max(len(r.target) for r in rows)
    print(f"{'target'.ljust(width)}  measured | baseline | ratio | limit | met")
    for row in rows:
        mark = "yes" if row.met else "NO"
        print(
            f"{row.target.ljust(width)}  {row.measured} | {row.baseline} | {row.ratio} | {row.limit} | {mark}"
        )
    print(
        f"({options.repeat} runs each, medians; {os.cpu_count()} cores; python {sys.version.split()[0]})"
    )
    return 0 if all(r.met for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
