"""A wheel built from the repo carries the catalogue and works outside the repo."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, bare_venv, pip_into, run_cli

pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRAINER_WORKSPACE")}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture
def wheel(repo_wheel: Path) -> Path:
    return repo_wheel


def test_the_wheel_carries_every_spec_solution_and_wrong_variant(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for spec in (REPO / "exercises").glob("*.yaml"):
        assert f"trainer/_catalog/exercises/{spec.name}" in names
    for solution in (REPO / "solutions").rglob("*.py"):
        relative = solution.relative_to(REPO / "solutions").as_posix()
        assert f"trainer/_catalog/solutions/{relative}" in names


def test_a_wheel_installed_in_a_fresh_venv_lists_and_checks_exercises(wheel: Path, tmp_path: Path):
    venv = _fresh_venv_with(wheel, tmp_path)
    python = venv / "bin" / "python"
    # The dependencies (torch, typer, rich, yaml) come from this environment's
    # site-packages as a plain path: its editable hook for the repo is not run,
    # so `trainer` can only come from the wheel.
    site = Path(
        _run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = _run(python, "-c", "import trainer; print(trainer.__file__)", cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr

    listing = _run(venv / "bin" / "trainer", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    for exercise_id in ("sigmoid", "linear", "clipped_relu"):
        assert exercise_id in listing.stdout

    installed = site / "trainer" / "_catalog" / "solutions" / "sigmoid.py"
    mine = tmp_path / "sigmoid.py"
    mine.write_text(installed.read_text())
    checked = _run(venv / "bin" / "trainer", "check", "sigmoid", "--file", mine, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"All \d+ stages passed", checked.stdout)

    # The installed catalogue is the trainer's own: never checked as a learner's file,
    # never readable from a learner's process.
    refused = _run(venv / "bin" / "trainer", "check", "sigmoid", "--file", installed, cwd=tmp_path)
    assert refused.returncode == 1 and "the trainer's own files" in refused.stdout, refused.stdout
    reader = tmp_path / "reader.py"
    reader.write_text(f"print(open({str(installed)!r}).read())\n" + installed.read_text())
    read = _run(venv / "bin" / "trainer", "check", "sigmoid", "--file", reader, cwd=tmp_path)
    assert read.returncode == 1 and f"tried to open {installed}" in read.stdout, read.stdout


def _metadata_fields(text: str) -> list[str]:
    """The metadata's header fields that say what the package is and needs."""
    return [
        line
        for line in text.split("\n\n", 1)[0].splitlines()
        if line.startswith(("Name:", "Version:", "Requires-Dist:", "Requires-Python:"))
    ]


def test_trainer_wheel_writes_the_files_the_build_does_and_pip_installs_it_from_the_file(
    wheel: Path, tmp_path: Path
):
    """The wheel `trainer wheel` (and `classroom init`) writes from the running trainer:
    every file of the build's wheel, byte for byte, the same metadata; pip installs it
    with no index at all, and the trainer it installs lists the exercises."""
    result = run_cli("wheel", "--dir", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    (mine,) = (tmp_path / "out").glob("*.whl")
    assert mine.name == wheel.name
    again = run_cli("wheel", "--dir", str(tmp_path / "again"))
    assert (
        again.exit_code == 0 and (tmp_path / "again" / mine.name).read_bytes() == mine.read_bytes()
    )

    ours, built = zipfile.ZipFile(mine), zipfile.ZipFile(wheel)
    package = [n for n in built.namelist() if ".dist-info/" not in n]
    assert sorted(n for n in ours.namelist() if ".dist-info/" not in n) == sorted(package)
    assert [n for n in package if ours.getinfo(n).CRC != built.getinfo(n).CRC] == []
    info = f"{wheel.name.split('-py3')[0]}.dist-info"
    assert _metadata_fields(ours.read(f"{info}/METADATA").decode()) == _metadata_fields(
        built.read(f"{info}/METADATA").decode()
    )
    assert ours.read(f"{info}/entry_points.txt") == built.read(f"{info}/entry_points.txt")

    venv = _fresh_venv_with(mine, tmp_path)  # pip checks the RECORD's hashes
    site = Path(
        _run(
            venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            cwd=tmp_path,
        ).stdout.strip()
    )  # fmt: skip
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    listing = _run(venv / "bin" / "trainer", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "sigmoid" in listing.stdout


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("sdist")
    built = _run(
        sys.executable, "-c", f"from hatchling.build import build_sdist; print(build_sdist({str(dist)!r}))",
        cwd=REPO,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (path,) = dist.glob("*.tar.gz")
    return path


def _fresh_venv_with(package: Path, tmp_path: Path, python: str = sys.executable) -> Path:
    venv = bare_venv(tmp_path / "venv", python)
    installed = _run(
        *pip_into(venv, "install", "--quiet", "--no-deps", "--no-index", package), cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    return venv


def test_an_sdist_builds_the_very_wheel_the_repository_builds(
    sdist: Path, wheel: Path, tmp_path: Path
):
    """Every file of the wheel built from the sdist, byte for byte (CRC), is the one of
    the wheel built from this checkout, which the test above installs and runs: the
    sdist leaves out nothing the package needs (the catalogue above all)."""
    wheels = tmp_path / "wheels"
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
        "-w", wheels, sdist, cwd=tmp_path,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel_from_sdist,) = wheels.glob("*.whl")

    def files(path: Path) -> dict[str, int]:
        return {entry.filename: entry.CRC for entry in zipfile.ZipFile(path).infolist()}

    from_sdist, from_checkout = files(wheel_from_sdist), files(wheel)
    assert sorted(set(from_sdist) ^ set(from_checkout)) == []
    assert [name for name, crc in from_sdist.items() if from_checkout[name] != crc] == []
    assert "trainer/_catalog/exercises/layer_norm.yaml" in from_sdist


PYTHON_310 = next(
    (
        p
        for p in (
            "/usr/bin/python3.10",
            str(Path.home() / ".pyenv/versions/3.10.13/bin/python3.10"),
        )
        if Path(p).is_file()
    ),
    None,
)


@pytest.mark.skipif(PYTHON_310 is None, reason="no Python 3.10 on this machine")
def test_the_commands_that_need_no_torch_work_on_python_3_10(wheel: Path, tmp_path: Path):
    # torch for 3.10 is not on this machine's disk (only a CUDA build online), so
    # on 3.10 the package, the spec loader and the torch-free commands are run.
    assert PYTHON_310 is not None
    venv = _fresh_venv_with(wheel, tmp_path, PYTHON_310)
    deps = _run(
        *pip_into(venv, "install", "--quiet", "typer>=0.12,<0.24", "rich", "pyyaml"), cwd=tmp_path
    )
    if deps.returncode != 0:
        pytest.skip(f"cannot install typer, rich and pyyaml for 3.10 here: {deps.stderr[-200:]}")
    workspace = tmp_path / "ws"
    for argv in (["list"], ["start", "sigmoid"], ["hint", "--all"], ["solution", "--force"]):
        result = _run(venv / "bin" / "trainer", *argv, "--workspace", workspace, cwd=tmp_path)
        assert result.returncode == 0, (argv, result.stderr)
    loaded = _run(
        venv / "bin" / "python", "-c",
        "from trainer.catalog import Catalog; print(len(Catalog.default().all))", cwd=tmp_path,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert int(loaded.stdout) >= 16


def test_every_install_line_of_the_readme_and_the_notebook_names_something_that_exists():
    """autograd-trainer is on no index: each `pip install` of the trainer names the
    wheel `trainer wheel` writes, or a git URL; no pin of an unpublished version."""
    from trainer.wheel import wheel_name

    notebook = json.loads((REPO / "examples" / "quickstart.ipynb").read_text())
    texts = {
        "README.md": (REPO / "README.md").read_text(),
        "quickstart.ipynb": "\n".join("".join(c["source"]) for c in notebook["cells"]),
    }
    for name, text in texts.items():
        targets = re.findall(r"pip install\s+\"?([^\s\"`|]+)", text)
        assert targets, name
        for target in targets:
            if target.startswith(("torch", "git+https://", "-e", "{")):
                continue
            assert target.rsplit("/", 1)[-1] == wheel_name(), (name, target)
        assert "autograd-trainer==" not in text, name
