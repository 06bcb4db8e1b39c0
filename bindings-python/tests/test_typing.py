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


def test_mypy_refuses_wrong_arguments_to_a_protected_function(tmp_path: pathlib.Path) -> None:
    # Issue 21: the decorator and call() took any arguments (no ParamSpec).
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import halfopen\n"
        "breaker = halfopen.CircuitBreaker('x')\n"
        "registry = halfopen.Registry()\n"
        "@breaker\n"
        "def ask(question: str) -> str:\n"
        "    return question\n"
        "async def ask_async(question: str) -> str:\n"
        "    return question\n"
        "ask(1)\n"
        "breaker.call(ask, 1)\n"
        "registry.get('a').call(ask, question=2)\n"
        "async def main() -> None:\n"
        "    await breaker.call_async(ask_async, 3)\n"
        "    await breaker(ask_async)(4)\n"
        "answer: int = ask('x')\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(wrong)], capture_output=True, text=True
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert [int(line.split(":")[1]) for line in errors] == [9, 10, 11, 13, 14, 15], out.stdout
