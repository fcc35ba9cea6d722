"""Shared paths and helpers of the `arbiter` package's tests (the package must be installed:
`pip install ./python`)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MURI = ROOT / "scenarios" / "muri-traces.toml"
SIXTY = ROOT / "data" / "tiresias" / "60_job.csv"


def arbiter_binary():
    """The `arbiter` binary `cargo test` or `cargo build` left, if any (ARBITER_BIN first)."""
    for candidate in [os.environ.get("ARBITER_BIN"), ROOT / "target" / "debug" / "arbiter", ROOT / "target" / "release" / "arbiter"]:
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


@pytest.fixture
def cli():
    """Runs the `arbiter` binary in the repository root: `cli("run", ...)` -> CompletedProcess
    (text). Skips the test where no binary was built."""
    binary = arbiter_binary()
    if binary is None:
        pytest.skip("build the arbiter binary first (cargo build) to compare with the command line")

    def run(*args):
        return subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)

    return run


def cli_json(cli, *args):
    out = cli("--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def cli_error(cli, *args):
    """What the command line prints after `error: ` for a refused command."""
    out = cli(*args)
    assert out.returncode != 0, out.stdout
    line = next(line for line in out.stderr.splitlines() if line.startswith("error: "))
    return line[len("error: "):]
