#!/usr/bin/env python3
"""Checks the shape of the code that compilers and clippy do not check.

    python3 scripts/lib/structure.py [--report]

Rules (test code — `#[cfg(test)]` items and `tests/` — is exempt):
  * no function longer than 150 lines in the engine, executor and store crates;
  * `unsafe` code in at most one module of the whole workspace;
  * environment variables read only by the CLI's `settings.rs` and the
    executor's `environment.rs` (test support is exempt);
  * no import cycle among the modules (files and inline `mod`s) of one crate:
    module A naming anything in B, and B, directly or through others, naming A.
    A `pub use` re-export is a name, not a dependency: a path through it
    counts as naming the module the item comes from.

Exits 1 and says where when a rule is broken. `--report` also prints the
longest functions and each crate's module count.
"""

import os
import re
import sys

LONG_FN_CRATES = ("engine", "executor", "store")
ENV_READS = ("var", "var_os", "vars", "vars_os")
ENV_READERS = ("crates/cli/src/settings.rs", "crates/executor/src/environment.rs")
MAX_FN_LINES = 150
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>b?r(?P<hashes>\#*)")
  | (?P<string>b?"(?:[^"\\]|\\.)*")
  | (?P<char>b?'(?:[^'\\\n]|\\.[^']*)')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>r\#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9][A-Za-z0-9_.]*)
  | (?P<path_sep>::)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokens(text):
    """Yields (kind, text, line) for the code tokens of a Rust file."""
    pos, line = 0, 1
    while pos < len(text):
        match = TOKEN.match(text, pos)
        kind = match.lastgroup
        if kind == "hashes":
            kind = "raw_string"
        if kind == "block_comment":
            end, depth = pos + 2, 1
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
        elif kind == "raw_string":
            closing = '"' + match.group("hashes")
            end = text.index(closing, match.end()) + len(closing)
        else:
            end = match.end()
        piece = text[pos:end]
        if kind not in ("ws", "line_comment", "block_comment"):
            yield kind, piece, line
        line += piece.count("\n")
        pos = end


def matching(toks, start):
    """Index of the bracket closing the one at `start`."""
    depth = 0
    for i in range(start, len(toks)):
        text = toks[i][1]
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return len(toks) - 1


def item_end(toks, start):
    """Index of the last token of the item starting at `start`."""
    i = start
    while i < len(toks):
        text = toks[i][1]
        if text == ";":
            return i
        if text == "{":
            return matching(toks, i)
        if text in "([":
            i = matching(toks, i)
        i += 1
    return len(toks) - 1


def use_end(toks, start):
    """Index of the `;` ending the `use` item at `start` (its braces are a
    tree of names, not a body)."""
    i = start
    while i < len(toks):
        text = toks[i][1]
        if text == ";":
            return i
        if text in ("(", "[", "{"):
            i = matching(toks, i)
        i += 1
    return len(toks) - 1


def path_attribute(toks, i):
    """The file a `#[path = "..."]` attribute at `i` names, or None."""
    if toks[i][1] != "#" or i + 5 >= len(toks) or toks[i + 1][1] != "[":
        return None
    name, equals, value, close = (toks[i + k] for k in range(2, 6))
    if name[1] == "path" and equals[1] == "=" and value[0] == "string" and close[1] == "]":
        return value[1][1:-1]
    return None


def without_test_items(toks):
    """Drops `#[cfg(test)]` items (and any attribute run they start)."""
    out, i = [], 0
    while i < len(toks):
        if toks[i][1] == "#" and i + 1 < len(toks) and toks[i + 1][1] == "[":
            close = matching(toks, i + 1)
            attr = " ".join(t[1] for t in toks[i + 2 : close])
            if attr == "cfg ( test )":
                j = close + 1
                while j + 1 < len(toks) and toks[j][1] == "#" and toks[j + 1][1] == "[":
                    j = matching(toks, j + 1) + 1
                i = item_end(toks, j) + 1
                continue
        out.append(toks[i])
        i += 1
    return out


class Module:
    def __init__(self, crate, path, file):
        self.crate, self.path, self.file = crate, path, file
        self.refs = []  # (path segments, line)
        self.exports = {}  # name re-exported by `pub use` -> its path segments
        self.unsafe_lines = []
        self.children = {}


def parse_module(crate, path, file, toks, modules, src_dir):
    """Records `path`'s module and, recursively, the modules it declares."""
    module = Module(crate, path, file)
    modules[tuple(path)] = module
    i, attr_path = 0, None
    while i < len(toks):
        kind, text, line = toks[i]
        declared = path_attribute(toks, i)
        if declared is not None:
            attr_path = os.path.join(os.path.dirname(file), declared)
            i += 6
            continue
        if text == "mod" and i + 1 < len(toks) and toks[i + 1][0] == "ident":
            name = toks[i + 1][1]
            if i + 2 < len(toks) and toks[i + 2][1] == ";":
                child = attr_path or child_file(file, name, src_dir, path)
                attr_path = None
                if child:
                    with open(child, encoding="utf-8") as handle:
                        child_toks = without_test_items(list(tokens(handle.read())))
                    parse_module(crate, path + [name], child, child_toks, modules, src_dir)
                module.children[name] = True
                i += 3
                continue
            if i + 2 < len(toks) and toks[i + 2][1] == "{":
                close = matching(toks, i + 2)
                parse_module(crate, path + [name], file, toks[i + 3 : close], modules, src_dir)
                module.children[name] = True
                i = close + 1
                continue
        if text == "unsafe" and kind == "ident":
            module.unsafe_lines.append(line)
        if text == "use":
            end = use_end(toks, i)
            public = i > 0 and (toks[i - 1][1] == "pub" or toks[i - 1][1] == ")")
            for segments, name in use_paths(toks[i + 1 : end]):
                if public:
                    module.exports[name] = segments
                else:
                    module.refs.append((segments, line))
            i = end + 1
            continue
        if kind == "ident" and i + 1 < len(toks) and toks[i + 1][0] == "path_sep":
            if i == 0 or toks[i - 1][0] != "path_sep":
                segments, j = [text], i + 1
                while j + 1 < len(toks) and toks[j][0] == "path_sep" and toks[j + 1][0] == "ident":
                    segments.append(toks[j + 1][1])
                    j += 2
                module.refs.append((segments, line))
                i = j
                continue
        i += 1
    return module


def use_paths(toks):
    """Expands a `use` tree into its paths (a glob keeps its prefix)."""
    paths, i = [], 0

    def tree(prefix, i):
        segments = list(prefix)
        while i < len(toks):
            kind, text, _ = toks[i]
            if kind == "ident" and text != "as":
                segments.append(text)
                i += 1
            elif kind == "path_sep":
                i += 1
            elif text == "{":
                close = matching(toks, i)
                j = i + 1
                while j < close:
                    j = tree(segments, j)
                    if j < close and toks[j][1] == ",":
                        j += 1
                return close + 1
            elif text == "*":
                paths.append((segments, "*"))
                return i + 1
            else:
                break
        name = segments[-1] if segments else None
        if text_is_alias(toks, i):
            name = toks[i + 1][1]
            i += 2
        if segments != list(prefix):
            paths.append((segments, name))
        return i

    while i < len(toks):
        i = tree([], i)
        if i < len(toks) and toks[i][1] == ",":
            i += 1
        elif i < len(toks):
            i += 1
    return paths


def text_is_alias(toks, i):
    return i < len(toks) and toks[i][1] == "as"


def child_file(file, name, src_dir, path):
    base = os.path.dirname(file)
    stem = os.path.splitext(os.path.basename(file))[0]
    if stem not in ("lib", "main", "mod") and path:
        base = os.path.join(base, stem)
    for candidate in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
        if os.path.exists(candidate):
            return candidate
    return None


def resolve(module, segments, modules, hops=0):
    """The deepest module of the crate a path names, or None; a name a
    module re-exports leads to where it comes from."""
    path = list(module.path)
    segs = list(segments)
    if segs[0] == "crate":
        path, segs = [], segs[1:]
    elif segs[0] == "self":
        segs = segs[1:]
    elif segs[0] == "super":
        while segs and segs[0] == "super":
            path, segs = path[:-1], segs[1:]
    elif segs[0] not in module.children:
        return None
    target = tuple(path)
    for k, seg in enumerate(segs):
        if target + (seg,) in modules:
            target = target + (seg,)
            continue
        exported = modules[target].exports.get(seg) if target in modules else None
        if exported and hops < 8:
            found = resolve(modules[target], exported + segs[k + 1 :], modules, hops + 1)
            return found if found is not None else target
        break
    return target


def cycles(modules):
    """Strongly connected components of more than one module (Tarjan)."""
    edges = {}
    for key, module in modules.items():
        targets = set()
        for segments, _ in module.refs:
            target = resolve(module, segments, modules)
            if target is not None and target != key:
                targets.add(target)
        edges[key] = targets
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in modules:
        if node not in index:
            visit(node)
    return found, edges


def long_functions(file, toks):
    found = []
    for i, (kind, text, line) in enumerate(toks):
        if text == "fn" and i + 1 < len(toks) and toks[i + 1][0] == "ident":
            j = i + 2
            while j < len(toks) and toks[j][1] not in ("{", ";"):
                if toks[j][1] in "([":
                    j = matching(toks, j)
                j += 1
            if j < len(toks) and toks[j][1] == "{":
                end_line = toks[matching(toks, j)][2]
                length = end_line - line + 1
                found.append((length, file, toks[i + 1][1], line))
    return found


def env_reads(file, toks):
    """Lines of `file` that read environment variables (`env::var` …)."""
    return [
        toks[i][2]
        for i in range(len(toks) - 2)
        if toks[i][1] == "env" and toks[i + 1][0] == "path_sep" and toks[i + 2][1] in ENV_READS
    ]


def crate_roots():
    crates_dir = os.path.join(ROOT, "crates")
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f))]
        bins = os.path.join(src, "bin")
        if os.path.isdir(bins):
            roots += [os.path.join(bins, f) for f in sorted(os.listdir(bins)) if f.endswith(".rs")]
        for root in roots:
            yield crate, src, root


def main():
    report = "--report" in sys.argv
    problems, all_fns, unsafe_modules = [], [], {}
    for crate, src, root in crate_roots():
        with open(root, encoding="utf-8") as handle:
            toks = without_test_items(list(tokens(handle.read())))
        modules = {}
        parse_module(crate, [], root, toks, modules, src)
        files = {module.file for module in modules.values()}
        for file in sorted(files):
            with open(file, encoding="utf-8") as handle:
                file_toks = without_test_items(list(tokens(handle.read())))
            for found in long_functions(file, file_toks):
                all_fns.append((found, crate))
            rel = os.path.relpath(file, ROOT)
            if crate != "test-support" and rel not in ENV_READERS:
                for line in env_reads(file, file_toks):
                    problems.append(f"{rel}:{line}: reads the environment (only {' and '.join(ENV_READERS)} do)")
        for module in modules.values():
            if module.unsafe_lines:
                unsafe_modules[(crate, tuple(module.path))] = (module.file, module.unsafe_lines)
        found, edges = cycles(modules)
        for component in found:
            names = ", ".join("::".join(c) or "(root)" for c in component)
            members = set(component)
            back = [
                f"{'::'.join(a) or '(root)'} -> {'::'.join(b) or '(root)'}"
                for a in component
                for b in sorted(edges[a])
                if b in members
            ]
            problems.append(
                f"{crate}: {len(component)} modules import each other in a circle: {names}\n"
                + "".join(f"      {edge}\n" for edge in back)
            )
        if report:
            print(f"{crate}: {len(modules)} modules, {len(found)} cycles")
    for (length, file, name, line), crate in sorted(all_fns, reverse=True):
        rel = os.path.relpath(file, ROOT)
        if length > MAX_FN_LINES and crate in LONG_FN_CRATES:
            problems.append(f"{rel}:{line}: fn {name} is {length} lines (at most {MAX_FN_LINES})")
        elif report and length > 100:
            print(f"  {length:4} lines  {rel}:{line} fn {name}")
    if len(unsafe_modules) > 1:
        where = "; ".join(
            f"{os.path.relpath(file, ROOT)}:{lines[0]}" for file, lines in unsafe_modules.values()
        )
        problems.append(f"`unsafe` appears in {len(unsafe_modules)} modules (at most one): {where}")
    for problem in problems:
        print(problem.rstrip(), file=sys.stderr)
    if problems:
        print(f"structure: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("structure: functions, unsafe and module imports are in shape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
