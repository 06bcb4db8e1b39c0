"""The stub matches the runtime (mypy's stubtest), and the package and a
typed user's code pass `mypy --strict`."""

from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def test_the_stub_matches_the_native_module() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "halfopen._native"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_passes_on_the_package_and_typed_code() -> None:
    package = HERE.parent / "python" / "halfopen"
    example = HERE.parents[1] / "examples" / "openai-bot"
    checked = [str(package), str(HERE / "typed_usage.py"), str(example / "bot.py"), str(example / "server.py")]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *checked],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
