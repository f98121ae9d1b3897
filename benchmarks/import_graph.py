"""Print the shape of cocoeval's import graph: python benchmarks/import_graph.py [CHECKOUT ...]

For each checkout (default: this one) it reads every module of ``cocoeval/`` with ``ast`` (no
import is executed; imports are read as ``tests/test_architecture.py`` reads them) and counts,
over the graph of modules (an edge for every import of a cocoeval module, lazy imports inside
functions and ``TYPE_CHECKING`` ones included; ``from pkg import mod`` is an edge to the submodule
only, ``from pkg import name`` to the package):

- modules, and top-level modules left flat in ``cocoeval/``;
- levels: the longest chain of imports, counted in modules, once every circle is shrunk to a point;
- imports running back up: the imports a depth-first walk finds closing a circle (the edges to
  remove for the graph to have no circle; 0 for a layered package);
- circles: groups of modules that import each other round (strongly connected components of
  more than one module), each listed;
- the same three for the graph of subpackages (a flat module counts as its own).

Run it on an older checkout to compare (``git worktree add /tmp/old <commit>``)."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_architecture import imports, targets  # noqa: E402  (what an import reaches: the rules' own reading)


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted((root / "cocoeval").rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    g: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for _, mod, names in imports(p, root):
            reached = targets(mod, names, root)  # mod, then the names that are submodules
            if names and len(reached) == len(names) + 1:  # ``from pkg import mod, ...``: the submodules only
                reached = reached[1:]
            g[m] |= {t for t in reached if t in mods and t != m}
    return g


def sccs(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def back_edges(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Edges a depth-first walk (in name order) finds pointing at a module still on its path."""
    state: dict[str, int] = {}
    out = []
    for start in sorted(g):
        if start in state:
            continue
        state[start] = 1
        work = [(start, iter(sorted(g[start])))]
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                state[v] = 2
                work.pop()
            elif state.get(w) == 1:
                out.append((v, w))
            elif w not in state:
                state[w] = 1
                work.append((w, iter(sorted(g[w]))))
    return out


def levels(g: dict[str, set[str]]) -> int:
    """The longest chain of imports once each circle is shrunk to a point (in nodes)."""
    comp_of = {m: i for i, c in enumerate(sccs(g)) for m in c}
    dag: dict[int, set[int]] = defaultdict(set)
    for v, ws in g.items():
        dag[comp_of[v]] |= {comp_of[w] for w in ws if comp_of[w] != comp_of[v]}
    depth: dict[int, int] = {}
    for c in range(len(set(comp_of.values()))):  # Tarjan gives components in reverse topological order
        depth[c] = 1 + max((depth[x] for x in dag[c]), default=0)
    return max(depth.values(), default=0)


def subpackage_graph(g: dict[str, set[str]]) -> dict[str, set[str]]:
    def sub(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else m

    out: dict[str, set[str]] = defaultdict(set)
    for v, ws in g.items():
        out[sub(v)] |= {sub(w) for w in ws if sub(w) != sub(v)}
        out.setdefault(sub(v), set())
    return dict(out)


def describe(root: Path) -> list[str]:
    g = graph(root)
    flat = sorted(p.name for p in (root / "cocoeval").glob("*.py"))
    circles = [c for c in sccs(g) if len(c) > 1]
    back = back_edges(g)
    sg = subpackage_graph(g)
    sub_circles = [c for c in sccs(sg) if len(c) > 1]
    lines = [
        f"{root}: {len(g)} modules, {len(flat)} flat in cocoeval/ ({', '.join(flat)})",
        f"  modules:     {levels(g)} levels, {len(back)} imports running back up, {len(circles)} circles",
        *(f"    back up: {v} -> {w}" for v, w in back),
        *(f"    circle: {' <-> '.join(c)}" for c in circles),
        f"  subpackages: {levels(sg)} levels, {len(back_edges(sg))} imports running back up, "
        f"{len(sub_circles)} circles",
        *(f"    circle: {' <-> '.join(c)}" for c in sub_circles),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "checkouts",
        nargs="*",
        type=Path,
        default=[ROOT],
        help="folders holding a cocoeval/ package (default: this checkout)",
    )
    for root in ap.parse_args(argv).checkouts:
        if not (root / "cocoeval").is_dir():
            print(f"{root}: no cocoeval/ folder there", file=sys.stderr)
            return 2
        print("\n".join(describe(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
