"""The prebuilt binaries `make dist` made, at work (`make dist-test`): each
Node platform package and wheel has the right form and tags; the x64 glibc
ones load here; the arm64 glibc ones run a seed scenario under qemu-user
with Debian's arm64 Node 18 and Python 3.11 (`make setup-arm64`); the
macOS ones are checked for their form only (no macOS here). The musl builds
are checked for their form and their C library (musl's `libc.so`); no musl
Node or Python is run here. The Windows ones (no Windows here, no Wine) are
checked for their form with pefile: x86-64 PE DLLs that export the entry
their host calls and import only DLLs every Windows 10 has (the addon
nothing of Node, the wheel python3.dll: abi3)."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile
from typing import List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE = ROOT / "bindings-node"
DIST = NODE / "dist"
WHEELS = ROOT / "target" / "wheels"
ARM64 = ROOT / "target" / "arm64" / "root"
QEMU = ["qemu-aarch64-static", "-L", str(ARM64)]
PLATFORMS = [
    "linux-x64-gnu", "linux-arm64-gnu", "linux-x64-musl", "linux-arm64-musl", "darwin-x64", "darwin-arm64", "win32-x64-msvc",
]

# Seed 000's breaker: two failures within the window open it.
NODE_SEED = """
const { backend, CircuitBreaker } = require('./halfopen')
const b = new CircuitBreaker({ name: 'gw', failureThreshold: 2, windowMs: 60000, openTimeoutMs: 30000 })
const fail = () => Promise.reject(new Error('down'))
b.execute(fail).catch(() => b.execute(fail)).catch(() => console.log(process.arch, backend, b.getState()))
"""
PYTHON_SEED = """
import platform, halfopen
b = halfopen.CircuitBreaker("gw", failure_threshold=2, window=60.0, open_timeout=30.0)
for _ in range(2):
    try:
        b.call(lambda: 1 / 0)
    except ZeroDivisionError:
        pass
print(platform.machine(), b.state.value)
"""


def tarball(platform: str) -> pathlib.Path:
    found = list(DIST.glob(f"halfopen-{platform}-*.tgz"))
    assert len(found) == 1, f"no tarball for {platform} in {DIST} (make dist)"
    return found[0]


def installed(tmp: pathlib.Path, platform: str) -> pathlib.Path:
    """The main package with `platform`'s binary beside it, as the platform
    package puts it there (the loader looks beside itself first)."""
    package = tmp / "halfopen"
    with tarfile.open(next(DIST.glob("halfopen-0*.tgz"))) as t:
        t.extractall(tmp / "main", filter="data")
    shutil.copytree(tmp / "main" / "package", package)
    with tarfile.open(tarball(platform)) as t:
        member = next(m for m in t.getmembers() if m.name.endswith(".node"))
        t.extractall(tmp / "platform", members=[member], filter="data")
        shutil.copy(tmp / "platform" / member.name, package / pathlib.Path(member.name).name)
    return package


def binary(platform: str) -> bytes:
    with tarfile.open(tarball(platform)) as t:
        member = next(m for m in t.getmembers() if m.name.endswith(".node"))
        data = t.extractfile(member)
        assert data is not None
        return data.read()


def run(args: List[str], cwd: pathlib.Path) -> str:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def packed_main() -> dict:  # type: ignore[type-arg]
    with tarfile.open(next(DIST.glob("halfopen-0*.tgz"))) as t:
        return json.load(t.extractfile("package/package.json"))  # type: ignore[arg-type,no-any-return]


def test_the_packed_main_package_names_every_platform_package_at_its_version() -> None:
    main = packed_main()
    assert main["optionalDependencies"] == {f"halfopen-{p}": main["version"] for p in PLATFORMS}
    assert "optionalDependencies" not in json.loads((NODE / "package.json").read_text()), "added when packed only"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_each_platform_package_holds_its_binary_only_and_the_main_version(platform: str) -> None:
    main = packed_main()
    with tarfile.open(tarball(platform)) as t:
        names = sorted(m.name for m in t.getmembers())
        manifest = json.load(t.extractfile("package/package.json"))  # type: ignore[arg-type]
    assert names == ["package/halfopen." + platform + ".node", "package/package.json"]
    assert manifest["version"] == main["version"] == main["optionalDependencies"][manifest["name"]]


def macos_minimum(data: bytes) -> str:
    """The minimum macOS of a Mach-O: LC_BUILD_VERSION's `minos` (0x32), or
    LC_VERSION_MIN_MACOSX's `version` (0x24, what targets before 10.14 get)."""
    count = int.from_bytes(data[16:20], "little")
    at = 32
    for _ in range(count):
        cmd, size = int.from_bytes(data[at:at + 4], "little"), int.from_bytes(data[at + 4:at + 8], "little")
        if cmd in (0x32, 0x24):
            offset = 12 if cmd == 0x32 else 8
            v = int.from_bytes(data[at + offset:at + offset + 4], "little")
            return f"{v >> 16}.{(v >> 8) & 0xFF}"
        at += size
    raise AssertionError("no LC_BUILD_VERSION nor LC_VERSION_MIN_MACOSX")


@pytest.mark.parametrize("platform,minimum", [("darwin-x64", "10.12"), ("darwin-arm64", "11.0")])
def test_the_macos_binaries_run_on_the_oldest_macos_rust_supports(platform: str, minimum: str) -> None:
    assert macos_minimum(binary(platform)) == minimum


@pytest.mark.parametrize("platform,magic", [
    ("linux-x64-gnu", b"\x7fELF"), ("linux-arm64-gnu", b"\x7fELF"), ("linux-x64-musl", b"\x7fELF"),
    ("linux-arm64-musl", b"\x7fELF"), ("darwin-x64", b"\xcf\xfa\xed\xfe"), ("darwin-arm64", b"\xcf\xfa\xed\xfe"),
    ("win32-x64-msvc", b"MZ"),
])
def test_each_binary_is_built_for_its_platform(platform: str, magic: bytes) -> None:
    data = binary(platform)
    assert data[:len(magic)] == magic
    if platform.startswith("linux"):
        machine = int.from_bytes(data[18:20], "little")
        assert machine == (62 if "x64" in platform else 183), "x86-64 or AArch64"
        # musl's C library is `libc.so`, glibc's `libc.so.6`.
        musl = platform.endswith("musl")
        assert (b"libc.so\x00" in data and b"libc.so.6" not in data) == musl, f"{platform}: its C library"
        assert (b"libc.so.6" in data) == (not musl)
    elif platform.startswith("darwin"):
        cpu = int.from_bytes(data[4:8], "little")
        assert cpu == (0x01000007 if "x64" in platform else 0x0100000C), "x86-64 or arm64 Mach-O"


def test_the_x64_glibc_217_build_loads_here(tmp_path: pathlib.Path) -> None:
    installed(tmp_path, "linux-x64-gnu")
    assert run(["node", "-e", NODE_SEED], tmp_path) == "x64 native OPEN"


def test_the_arm64_glibc_build_runs_under_qemu_with_an_arm64_node(tmp_path: pathlib.Path) -> None:
    installed(tmp_path, "linux-arm64-gnu")
    assert run([*QEMU, str(ARM64 / "usr/bin/node"), "-e", NODE_SEED], tmp_path) == "arm64 native OPEN"


def wheel(tag: str) -> pathlib.Path:
    found = list(WHEELS.glob(f"halfopen-*-cp310-abi3-*{tag}*.whl"))
    assert len(found) == 1, f"no wheel {tag} in {WHEELS} (make dist)"
    return found[0]


@pytest.mark.parametrize("tag", ["manylinux_2_17_x86_64", "manylinux_2_17_aarch64", "musllinux_1_2_x86_64", "musllinux_1_2_aarch64"])
def test_the_wheels_have_their_tags(tag: str) -> None:
    path = wheel(tag)
    if tag.startswith("manylinux"):
        shown = run([sys.executable, "-m", "auditwheel", "show", str(path)], ROOT)
        assert f'"{tag}"' in " ".join(shown.split()), shown
    with zipfile.ZipFile(path) as z:
        assert "halfopen/py.typed" in z.namelist()


@pytest.mark.parametrize("tag,minimum", [("macosx_10_12_x86_64", "10.12"), ("macosx_11_0_arm64", "11.0")])
def test_the_macos_wheels_are_mach_o_for_their_macos(tag: str, minimum: str) -> None:
    with zipfile.ZipFile(wheel(tag)) as z:
        name = next(n for n in z.namelist() if n.endswith(".so"))
        data = z.read(name)
    assert data[:4] == b"\xcf\xfa\xed\xfe"
    assert macos_minimum(data) == minimum


@pytest.mark.parametrize("tag,machine,python", [
    ("manylinux_2_17_x86_64", "x86_64", [sys.executable]),
    ("manylinux_2_17_aarch64", "aarch64", [*QEMU, str(ARM64 / "usr/bin/python3.11")]),
])
def test_the_glibc_wheels_run_a_seed_scenario(tmp_path: pathlib.Path, tag: str, machine: str, python: List[str]) -> None:
    with zipfile.ZipFile(wheel(tag)) as z:
        z.extractall(tmp_path)
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{PYTHON_SEED}"
    assert run([*python, "-I", "-c", code], tmp_path) == f"{machine} OPEN"


# What every Windows 10 (and later) has: the system's DLLs and the UCRT's
# API sets. Anything else (node.exe, libnode.dll, MinGW's libgcc_s or
# libwinpthread) would fail to load on a user's machine.
WINDOWS_DLLS = {"kernel32.dll", "ntdll.dll", "ws2_32.dll", "userenv.dll", "bcryptprimitives.dll", "advapi32.dll", "user32.dll"}


def pe_form(data: bytes) -> "tuple[int, bool, set[str], set[bytes]]":
    """A PE's machine, whether it is a DLL, the DLLs it imports (lower case), and its exports."""
    import pefile  # type: ignore[import-untyped]

    # Zig's linker exports every symbol of a MinGW DLL (it does not take
    # Rust's export list): more than pefile reads by default.
    pe = pefile.PE(data=data, max_symbol_exports=1 << 16)
    imports = {entry.dll.decode().lower() for entry in pe.DIRECTORY_ENTRY_IMPORT}
    exports = {symbol.name for symbol in pe.DIRECTORY_ENTRY_EXPORT.symbols if symbol.name}
    return pe.FILE_HEADER.Machine, pe.is_dll(), imports, exports


def assert_windows_dlls(imports: "set[str]", allowed: "set[str]") -> None:
    foreign = {d for d in imports if d not in allowed and not d.startswith("api-ms-win-")}
    assert not foreign, f"imports DLLs Windows does not have: {foreign}"
    assert any(d.startswith("api-ms-win-crt-") for d in imports), "the UCRT, as an MSVC build's"


def test_the_windows_addon_is_an_x64_dll_that_takes_node_api_from_its_host() -> None:
    machine, dll, imports, exports = pe_form(binary("win32-x64-msvc"))
    assert (machine, dll) == (0x8664, True)
    assert b"napi_register_module_v1" in exports
    # Nothing of Node is linked: Node-API comes from the host process at load time.
    assert_windows_dlls(imports, WINDOWS_DLLS)


def test_the_windows_wheel_is_an_abi3_x64_extension() -> None:
    with zipfile.ZipFile(wheel("win_amd64")) as z:
        assert "halfopen/py.typed" in z.namelist()
        data = z.read("halfopen/_native.pyd")
    machine, dll, imports, exports = pe_form(data)
    assert (machine, dll) == (0x8664, True)
    assert b"PyInit__native" in exports
    assert "python3.dll" in imports, "abi3: the stable ABI's python3.dll, not one version's"
    assert_windows_dlls(imports, WINDOWS_DLLS | {"python3.dll"})
