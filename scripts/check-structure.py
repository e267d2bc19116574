#!/usr/bin/env python3
"""Checks the shape of the crates' source trees: no file over the line limit, every file opening
with its `//!` line, and no import circle between files.

An edge A -> B means code in file A names an item that file B defines: `use` trees and inline
paths starting with `crate::`, `super::` or `self::` are resolved to the deepest module file they
reach, and a name a module only re-exports (`pub use child::Name`) is followed to the file that
defines it, so a `mod.rs` that merely gathers its children's names is not part of a circle.
Re-exports themselves are not edges; `mod x;` declarations are not edges; neither is
`use super::*;`, the import of a test module from the module it tests.

Rooms are layered: a file in a room may not name an item of a room above it (LAYERS below: the
plugin rooms of host/src, lowest first; a room names only rooms listed before it).

The end-to-end binary's module names are test filters: `make test` passes `--skip <module>::` to
every test binary of the workspace, and a filter is a substring of a test's path, so no other
module of the workspace may have a name ending in one of them (it would skip that module's tests).

Usage: scripts/check-structure.py [--max-lines N] [SRC_DIR ...]   (default: host/src apiserver/src)
Exits 1 and names every file and circle at fault.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

MAX_LINES = 600
DEFAULT_ROOTS = ["host/src", "apiserver/src"]
# host/src's plugin rooms, lowest first: each may use the ones before it, never one after it.
# `config` takes no plugin type; the runtime (`wasm`) knows neither delivery nor upgrades.
LAYERS = {"host/src": ["config", "manifest", "wasm", "upgrade", "delivery"]}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PATH_RE = re.compile(rf"\b(crate|super|self)((?:\s*::\s*{IDENT})+)")
MOD_RE = re.compile(rf"\bmod\s+({IDENT})\b")
# tests/e2e.rs's modules; `common` is its harness, never a filter.
E2E_ROOT = Path("tests/e2e.rs")
E2E_HARNESS = "common"
SKIPPED_DIRS = {"target", "node_modules"}
DEFINES_RE = r"\b(?:struct|enum|union|fn|trait|type|const|static|mod|macro_rules!)\s+{name}\b"


def strip_comments_and_strings(text: str) -> str:
    """Blanks comments, string and char literals (keeping line breaks) so paths in them are ignored."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(' ""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, root: Path):
        self.root = root
        self.files: dict[tuple[str, ...], Path] = {}
        self.code: dict[Path, str] = {}
        for path in sorted(root.rglob("*.rs")):
            self.code[path] = strip_comments_and_strings(path.read_text())
            if path.parent == root and path.name == "main.rs" and (root / "lib.rs").exists():
                continue  # the binary's root: its `crate::` is its own, not the library's
            self.files[self.module_of(path)] = path

    def module_of(self, path: Path) -> tuple[str, ...]:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts.pop()
        return tuple(parts)

    def is_dir_module(self, path: Path) -> bool:
        return path.stem in ("mod", "lib", "main")

    def absolute(self, path: Path, segments: list[str]) -> list[str] | None:
        """The crate-absolute segments of a path written in `path`, or None for an external one."""
        here = list(self.module_of(path))
        head, rest = segments[0], segments[1:]
        if head == "crate":
            return rest
        if head == "self":
            return here + rest
        if head == "super":
            base = here[:-1] if here else None
            while rest and rest[0] == "super":
                base, rest = (base[:-1] if base else None), rest[1:]
            return None if base is None else base + rest
        return None

    def resolve(self, segments: list[str], seen: frozenset = frozenset()) -> Path | None:
        """The file defining the item `segments` names, following re-exports."""
        for depth in range(len(segments), -1, -1):
            module = tuple(segments[:depth])
            if module in self.files:
                break
        else:
            return None
        file = self.files[module]
        rest = segments[depth:]
        if not rest or (file, rest[0]) in seen:
            return file
        name = rest[0]
        if re.search(DEFINES_RE.format(name=re.escape(name)), self.code[file]):
            return file
        for source in self.reexports(file, name):
            target = self.resolve(source + rest[1:], seen | {(file, name)})
            if target is not None:
                return target
        return file

    def reexports(self, file: Path, name: str) -> list[list[str]]:
        """Crate-absolute sources of `pub use` items of `file` that bring `name` into scope."""
        sources = []
        for visibility, tree in self.use_trees(file):
            if not visibility:
                continue
            for segments, alias in expand(tree):
                if segments[0] not in ("crate", "super", "self"):
                    segments = ["self"] + segments
                absolute = self.absolute(file, segments)
                if absolute is None:
                    continue
                if alias == "*":
                    sources.append(absolute + [name])
                elif alias == name:
                    sources.append(absolute)
        return sources

    def use_trees(self, file: Path):
        for m in re.finditer(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);", self.code[file]):
            yield m.group(1), m.group(2)

    def edges(self, file: Path) -> set[Path]:
        code = self.code[file]
        targets = set()
        paths = []
        for visibility, tree in self.use_trees(file):
            if visibility:
                continue  # a re-export: references through it are followed to their file
            for segments, alias in expand(tree):
                if alias == "*" and segments[0] in ("super", "self"):
                    continue  # `use super::*;` of a test module: its parent, never a circle
                paths.append(segments)
        without_uses = re.sub(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+[^;]+;", "", code)
        for m in PATH_RE.finditer(without_uses):
            paths.append([m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()])
        for segments in paths:
            if segments[0] not in ("crate", "super", "self"):
                continue
            absolute = self.absolute(file, segments)
            if absolute is None:
                continue
            target = self.resolve(absolute)
            if target is not None and target != file:
                targets.add(target)
        return targets


def expand(tree: str) -> list[tuple[list[str], str]]:
    """`a::{b, c::d as e, f::*}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a','f'], '*')]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    results = []

    def walk(prefix: list[str], text: str):
        text = text.strip()
        if not text:
            return
        if text.endswith("}") and "{" in text:
            brace = text.index("{")
            head = [s.strip() for s in text[:brace].split("::") if s.strip()]
            for part in split_top(text[brace + 1:-1]):
                walk(prefix + head, part)
            return
        alias = None
        if " as " in text:
            text, alias = [s.strip() for s in text.split(" as ", 1)]
        segments = prefix + [s.strip() for s in text.split("::") if s.strip()]
        if segments and segments[-1] == "*":
            results.append((segments[:-1], "*"))
        elif segments and segments[-1] == "self":
            segments = segments[:-1]
            results.append((segments, alias or segments[-1]))
        elif segments:
            results.append((segments, alias or segments[-1]))

    walk([], tree.lstrip(":"))
    return [(s, a) for s, a in results if s]


def split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for c in text:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return parts


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return result


def shortest_cycle(graph: dict[Path, set[Path]], component: list[Path]) -> list[Path]:
    """One shortest cycle through the component's first file, to show where to cut."""
    members = set(component)
    start = component[0]
    frontier, parent = [start], {start: None}
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    cycle = [v]
                    while parent[cycle[-1]] is not None:
                        cycle.append(parent[cycle[-1]])
                    return [start] + list(reversed(cycle[:-1])) + [start] if len(cycle) > 1 else [start, v, start]
                if w in members and w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    return component


def filter_collisions(repo: Path) -> list[str]:
    """Modules of the workspace whose names end in an end-to-end module's name (a `--skip` filter)."""
    e2e = set(MOD_RE.findall(strip_comments_and_strings((repo / E2E_ROOT).read_text())))
    e2e.discard(E2E_HARNESS)
    problems = []
    for directory, subdirs, files in os.walk(repo):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for path in sorted(Path(directory) / f for f in files if f.endswith(".rs")):
            declared = MOD_RE.findall(strip_comments_and_strings(path.read_text(errors="replace")))
            for name in declared:
                if path.relative_to(repo) == E2E_ROOT and name in e2e:
                    continue
                for module in sorted(m for m in e2e if name.endswith(m)):
                    problems.append(
                        f"error: {path.relative_to(repo)} declares `mod {name}`, whose name ends in the "
                        f"end-to-end module `{module}`: `make test`'s `--skip {module}::` would skip its "
                        "tests too; rename one of them")
    return problems


def room(root: Path, path: Path, layers: list[str]) -> str | None:
    top = path.relative_to(root).parts[0].removesuffix(".rs")
    return top if top in layers else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument("roots", nargs="*", default=DEFAULT_ROOTS)
    args = parser.parse_args()
    problems = 0
    for root in map(Path, args.roots):
        crate = Crate(root)
        for path in sorted(crate.code):
            lines = path.read_text().count("\n")
            if lines > args.max_lines:
                print(f"error: {path} has {lines} lines, over the limit of {args.max_lines}; "
                      "split it into modules with one responsibility each")
                problems += 1
            first = next((l for l in path.read_text().splitlines() if l.strip()), "")
            if not first.startswith("//!"):
                print(f"error: {path} does not open with a `//!` line; say in one line what the "
                      "module is for")
                problems += 1
        graph = {path: crate.edges(path) for path in crate.code
                 if not (path.name == "main.rs" and path not in crate.files.values())}
        layers = LAYERS.get(root.as_posix().rstrip("/"), [])
        for path in sorted(graph):
            here = room(root, path, layers)
            for target in sorted(graph[path]):
                there = room(root, target, layers)
                if here is not None and there is not None and layers.index(there) > layers.index(here):
                    print(f"error: {path} (room `{here}`) uses {target} (room `{there}`), a room "
                          f"above it; rooms use only those below them ({' < '.join(layers)}): "
                          "move the item down or pass it in")
                    problems += 1
        for component in circles(graph):
            cycle = shortest_cycle(graph, component)
            print(f"error: {len(component)} files of {root} import each other in a circle: "
                  + ", ".join(str(p.relative_to(root)) for p in component))
            print("  for example: " + " -> ".join(str(p.relative_to(root)) for p in cycle))
            print("  fix: move what both sides need into a module below them, or pass it in")
            problems += 1
    for problem in filter_collisions(Path(__file__).resolve().parent.parent):
        print(problem)
        problems += 1
    if problems:
        print(f"{problems} structure problem(s); the rules are in docs/architecture.md")
        return 1
    print(f"structure ok: {', '.join(args.roots)} (no file over {args.max_lines} lines, "
          "every file opens with `//!`, no import circle, rooms used only from above; no module "
          "name ends in an end-to-end module's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
