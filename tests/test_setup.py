"""The Makefile's set-up: a CPU torch from PyTorch's index when it answers, else the
default index at once; TORCH_INDEX and TORCH_SPEC choose (issue 28).

The recipe runs for real with a stand-in interpreter: `-m venv` makes a venv whose
python only records its arguments, so no package is installed; the probe runs on
this interpreter, against a local server or a closed port.
"""

from __future__ import annotations

import http.server
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

STAND_IN = """#!/bin/bash
if [ "$1" = -m ] && [ "$2" = venv ]; then
    mkdir -p "$3/bin"
    printf '#!/bin/bash\\necho "$*" >> %s\\n' "{log}" > "$3/bin/python"
    chmod +x "$3/bin/python"
else
    exec {python} "$@"
fi
"""


def setup(tmp_path: Path, **variables: str) -> tuple[list[str], str, float]:
    """`make setup` with ``variables``: the pip commands run, what make said, seconds."""
    log = tmp_path / "pip.log"
    python = tmp_path / "python3"
    python.write_text(STAND_IN.format(log=log, python=shlex.quote(sys.executable)))
    python.chmod(0o755)
    started = time.monotonic()
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "setup", f"PYTHON={python}",
         f"VENV={tmp_path / 'venv'}", *(f"{k}={v}" for k, v in variables.items())],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    return log.read_text().splitlines(), done.stdout + done.stderr, seconds


@pytest.fixture
def answering_index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_torch_comes_from_the_cpu_index_when_it_answers(tmp_path: Path, answering_index: str):
    pips, _, _ = setup(tmp_path, TORCH_CPU_INDEX=answering_index)
    assert pips[0] == f"-m pip install --quiet torch==2.13.0 --index-url {answering_index}"
    assert pips[1:] == ["-m pip install --quiet numpy", "-m pip install --quiet -e .[dev]"]


def test_torch_comes_from_the_default_index_at_once_when_the_cpu_index_is_out_of_reach(
    tmp_path: Path,
):
    index = closed_port()
    pips, said, seconds = setup(tmp_path, TORCH_CPU_INDEX=index)
    assert pips[0] == "-m pip install --quiet torch==2.13.0"
    assert f"note: {index} is out of reach: torch from pip's default index" in said
    assert seconds < 5


@pytest.mark.parametrize(
    ("variables", "command"),
    [
        ({"TORCH_INDEX": "https://download.pytorch.org/whl/cu124"},
         "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu124"),
        ({"TORCH_INDEX": "default"}, "torch==2.13.0"),
        ({"TORCH_INDEX": "default", "TORCH_SPEC": "torch==2.5.1"}, "torch==2.5.1"),
    ],
    ids=["an-index-given", "the-default-index", "another-version"],
)  # fmt: skip
def test_torch_index_and_torch_spec_choose_without_a_probe(
    tmp_path: Path, answering_index: str, variables: dict[str, str], command: str
):
    pips, said, _ = setup(tmp_path, TORCH_CPU_INDEX=answering_index, **variables)
    assert pips[0] == f"-m pip install --quiet {command}"
    assert "out of reach" not in said
