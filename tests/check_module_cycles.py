"""Fails when the modules of one crate form a cycle (issue 22): a module
that uses another (`crate::a::…`, `crate::{a, b::…}`, `super::a`) depends on
it; a submodule may use its parent. Leaves import nothing of their callers,
as quinn-proto's `congestion/` does. Usage: check_module_cycles.py SRC...
(each a crate's `src/` folder); prints every cycle and exits 1 if any."""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Dict, List, Set

Graph = Dict[str, Set[str]]


def modules(src: pathlib.Path) -> Dict[str, str]:
    """Each module's path (`a::b`; `crate` for the root) and its source."""
    found = {}
    for file in sorted(src.rglob("*.rs")):
        parts = list(file.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("lib", "main", "mod"):
            parts = parts[:-1]
        found["::".join(parts) or "crate"] = file.read_text()
    return found


def paths(text: str) -> List[str]:
    """The `crate::` paths a source names, with `crate::{a, b::c}` groups
    (nested ones too) spelled out."""
    text = re.sub(r"//[^\n]*", "", text)
    out: List[str] = []

    def expand(prefix: str, group: str) -> None:
        depth, item = 0, ""
        for ch in group + ",":
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                item = item.strip()
                nested = re.match(r"([\w:]*?)::\{(.*)\}$", item, re.S)
                if nested:
                    expand(prefix + nested.group(1) + "::", nested.group(2))
                elif item:
                    out.append(prefix + item.split(" as ")[0].strip())
                item = ""
            else:
                item += ch

    for match in re.finditer(r"\bcrate::\{", text):
        depth, end = 1, match.end()
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        expand("", text[match.end():end - 1])
    out += re.findall(r"\bcrate::([a-z_]\w*(?:::[a-z_]\w*)*)", text)
    return out


def graph(found: Dict[str, str]) -> Graph:
    deps: Graph = {}
    for name, text in found.items():
        used: Set[str] = set()
        for path in paths(text):
            parts = path.split("::")
            for k in range(len(parts), 0, -1):
                if "::".join(parts[:k]) in found:
                    used.add("::".join(parts[:k]))
                    break
        parent = name.split("::")[:-1]
        for sibling in re.findall(r"\bsuper::([a-z_]\w*)", re.sub(r"//[^\n]*", "", text)):
            if "::".join(parent + [sibling]) in found:
                used.add("::".join(parent + [sibling]))
        deps[name] = {m for m in used if m != name and m != "crate" and not name.startswith(m + "::")}
    return deps


def cycles(deps: Graph) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def main(sources: List[str]) -> int:
    bad = 0
    for src in sources:
        deps = graph(modules(pathlib.Path(src)))
        for component in cycles(deps):
            bad += 1
            print(f"{src}: modules in a cycle: {', '.join(component)}")
            for m in component:
                print(f"  {m} uses {', '.join(sorted(deps[m] & set(component)))}")
    print(f"module cycles: {bad} in {len(sources)} crates")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
