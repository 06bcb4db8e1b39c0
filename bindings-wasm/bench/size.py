"""The wasm module's size, what takes it, and how small it could be.

    python3 bindings-wasm/bench/size.py    (after `make wasm-build`; twiggy from `cargo install twiggy`)

Prints: the module's size after `wasm-opt -Oz` and gzipped; `twiggy top` of
the module (names kept) grouped by what each function belongs to; and the
size of two variants built apart in a scratch copy of the workspace (its
own target folder), to show the floor: the snapshot methods stubbed out,
then the registry removed too (a single breaker)."""

import collections
import csv
import gzip
import io
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
WASM_OPT = ROOT / "bindings-wasm" / "node_modules" / ".bin" / "wasm-opt"
FEATURES = ["bulk-memory", "nontrapping-float-to-int", "sign-ext", "mutable-globals", "reference-types", "multivalue"]
GROUPS = [
    ("snapshots", r"snapshot|saved|Saved|restore|json|Json|Bytes"),
    ("formatting", r"fmt|flt2dec|bignum|float|Formatter|dragon|grisu|Display|Debug|escape"),
    ("exported methods", r"^native"),
    ("the translation shared with the Node addon", r"halfopen_node"),
    ("the core", r"halfopen::"),
    ("dlmalloc", r"dlmalloc|__rust_(alloc|realloc|dealloc)|__rdl"),
    ("hash tables", r"hashbrown|foldhash|Hash"),
    ("alloc", r"alloc"),
    ("strings", r"data segment"),
    ("sort", r"sort"),
]


def run(*args: str, cwd: pathlib.Path = ROOT) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def build(workspace: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The optimised module of `workspace`'s wasm crate, in `out`."""
    run("cargo", "build", "-q", "-p", "halfopen-wasm", "--target", "wasm32-unknown-unknown", "--profile", "wasm", cwd=workspace)
    module = workspace / "target" / "wasm32-unknown-unknown" / "wasm" / "halfopen_wasm.wasm"
    run("wasm-bindgen", "--target", "web", "--out-dir", str(out), str(module))
    bg = out / "halfopen_wasm_bg.wasm"
    run(str(WASM_OPT), "-Oz", *[f"--enable-{f}" for f in FEATURES], str(bg), "-o", str(bg))
    return bg


def kb(n: int) -> str:
    return f"{n / 1000:.0f} KB"


def groups(module: pathlib.Path, out: pathlib.Path) -> None:
    run("wasm-bindgen", "--keep-debug", "--target", "web", "--out-dir", str(out), str(module))
    table = run("twiggy", "top", "-n", "100000", "--format", "csv", str(out / "halfopen_wasm_bg.wasm"))
    sizes: collections.Counter = collections.Counter()
    for row in csv.DictReader(io.StringIO(table)):
        if "function names" in row["Name"]:
            continue
        group = next((g for g, pattern in GROUPS if re.search(pattern, row["Name"])), "the rest")
        sizes[group] += int(row["ShallowSize"])
    print(f"what takes it (twiggy, before wasm-opt, {kb(sum(sizes.values()))}):")
    for group, size in sizes.most_common():
        print(f"  {group}: {kb(size)}")


def variant(name: str, edits: dict) -> None:
    """Builds the module with `edits` ({file: [(old, new)]}) in a scratch copy."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = pathlib.Path(scratch) / "ws"
        run("git", "worktree", "add", "-q", "--detach", str(copy), "HEAD")
        try:
            for file, replacements in edits.items():
                path = copy / file
                text = path.read_text()
                for old, new in replacements:
                    assert old in text, f"{file}: {old!r} not found"
                    text = text.replace(old, new)
                path.write_text(text)
            size = build(copy, pathlib.Path(scratch) / "out").stat().st_size
            print(f"{name}: {kb(size)}")
        finally:
            run("git", "worktree", "remove", "--force", str(copy))


def main() -> None:
    dist = ROOT / "bindings-wasm" / "dist" / "halfopen_wasm_bg.wasm"
    data = dist.read_bytes()
    print(f"the module: {kb(len(data))} after wasm-opt -Oz, {kb(len(gzip.compress(data, 9)))} gzipped")
    if shutil.which("twiggy"):
        with tempfile.TemporaryDirectory() as out:
            groups(ROOT / "target" / "wasm32-unknown-unknown" / "wasm" / "halfopen_wasm.wasm", pathlib.Path(out))
    else:
        print("(twiggy not found: `cargo install twiggy` for what takes the space)", file=sys.stderr)
    stub = 'let _ = (open(&self.0)?, now_ms); Err(JsError::new("stubbed"))'
    no_snapshots = {
        "bindings-wasm/src/breaker.rs": [
            ("Ok(open(&self.0)?.snapshot_json(now_ms))", stub),
            ("Ok(open(&self.0)?.snapshot_bytes(now_ms))", stub),
            ("open(&self.0)?.restore(json, bytes, now_ms).map_err(thrown)", "{ let _ = (json, bytes); " + stub + " }"),
        ],
        "bindings-wasm/src/registry.rs": [
            ("Ok(open(&self.0)?.snapshot_json(now_ms))", stub),
            ("open(&self.0)?.restore_json(json, now_ms).map_err(thrown)", "{ let _ = json; " + stub + " }"),
        ],
    }
    variant("without the snapshot methods", no_snapshots)
    single = dict(no_snapshots)
    single["bindings-wasm/src/lib.rs"] = [("mod registry;", ""), ("pub use registry::NativeRegistry;", "")]
    variant("a single breaker (no snapshots, no registry)", single)


if __name__ == "__main__":
    main()
