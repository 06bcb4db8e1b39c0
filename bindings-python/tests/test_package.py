"""Packaging: the package builds into one abi3 wheel (CPython 3.10+), with its
own README as the description, which installs into a fresh venv (nothing
else in it) and works there."""

from __future__ import annotations

import pathlib
import email
import subprocess
import sys
import venv
import zipfile

PACKAGE = pathlib.Path(__file__).resolve().parents[1]

USE = """
import asyncio, halfopen
b = halfopen.CircuitBreaker("fresh", failure_threshold=1)
assert b.call(len, "abc") == 3
try:
    b.call(lambda: 1 / 0)
except ZeroDivisionError:
    pass
try:
    b.call(len, "x")
except halfopen.CircuitOpenError as e:
    print("refused", e.reason, e.retry_after > 0)
import importlib.resources
assert importlib.resources.files("halfopen").joinpath("py.typed").is_file()
assert importlib.resources.files("halfopen").joinpath("_native.pyi").is_file()
"""


def test_one_abi3_wheel_installs_into_a_fresh_venv(tmp_path: pathlib.Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", str(wheels), str(PACKAGE)],
        check=True,
    )
    (wheel,) = wheels.glob("halfopen-*.whl")
    assert "-cp310-abi3-" in wheel.name, wheel.name
    # PyPI shows the package's own README (pyproject's `readme`), as Markdown.
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(z.read(name))
    assert metadata["Description-Content-Type"].startswith("text/markdown")
    description = metadata.get_payload(decode=True).decode("utf-8")
    assert description.strip() == (PACKAGE / "README.md").read_text(encoding="utf-8").strip()
    assert description.startswith("# halfopen — for Python\n")
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], check=True)
    out = subprocess.run([str(python), "-c", USE], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "refused open True"
