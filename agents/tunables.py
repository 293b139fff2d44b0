"""Tunable integer parameters of a candidate's source, found statically, and the rewriting of their literals.

A tunable is one integer value held by one or more literals in the source:

- a keyword argument with an integer literal at a Triton launch site (`kernel[grid](..., BLOCK_SIZE=128,
  num_warps=4)`) whose name is `num_warps`, `num_stages` or an ALL-CAPS tuning name (BLOCK*, TILE*, *THREAD*,
  GROUP*, SPLIT*, UNROLL*, VEC*, *WARPS*, *STAGES*...); a literal of the same value in that launch's grid
  (`grid = (triton.cdiv(n, 128),)`) is linked to it, so that both change together;
- an ALL-CAPS assignment of an integer literal (`BLOCK = 256` at module level, in a function or as `self.BLOCK`)
  whose name feeds such a keyword (`BLOCK_SIZE=BLOCK`);
- in string literals (CUDA sources for `load_inline`, C/C++ sources for `evaluator.native.load_c`), `#define NAME
  <int>` lines and `constexpr int NAME = <int>;` declarations with a tuning name (a block size is capped at 1024
  threads only in CUDA device code, a string with `__global__`).

Flags and problem sizes (`ACTIVATION=1`, `N = 4096`, `#define WARP_SIZE 32`) are not tunables. Python is read with
`ast`; a rewrite replaces exactly the literals' character spans, so the rest of the file stays byte-identical.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evaluator.source_ast import parse_source

Span = tuple[int, int]
_Found = tuple[str, int, str, str, tuple[Span, ...]]  # name, value, role, kind, spans

LADDERS: dict[str, tuple[int, ...]] = {"warps": (1, 2, 4, 8, 16), "stages": (1, 2, 3, 4, 5)}
BOUNDS: dict[str, tuple[int, int]] = {"block": (16, 8192), "threads": (32, 1024), "group": (1, 64), "unroll": (1, 16)}
CUDA_BLOCK_MAX = 1024  # a CUDA "block size" is usually threads per block
NOT_TUNABLE = frozenset({"WARP_SIZE", "WARPSIZE", "FULL_MASK", "GROUPS", "NUM_GROUPS", "N_GROUPS"})

_ALL_CAPS = re.compile(r"[A-Z][A-Z0-9_]*")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# A #define fills a C++ line: one between real newlines, `\n` escapes of a one-line Python string, or its quotes.
_DEFINE = re.compile(
    r"(?:^|(?<=\\n)|(?<=[\"']))[ \t]*#[ \t]*define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+\(?(\d+)\)?[ \t]*"
    r"(?=$|//|/\*|\\[nr]|[\"'])",
    re.M,
)
_CONSTEXPR = re.compile(
    r"\b(?:static[ \t]+)?(?:constexpr|const)[ \t]+(?:unsigned[ \t]+|signed[ \t]+)?"
    r"(?:int|long|short|size_t|u?int(?:32|64)_t)[ \t]+([A-Z_][A-Z0-9_]*)[ \t]*=[ \t]*(\d+)[ \t]*;"
)


@dataclass(frozen=True, slots=True)
class Tunable:
    label: str                  # unique within the source: the name, with "@L<line>" where the name repeats
    name: str
    value: int
    role: str                   # block | threads | group | unroll | warps | stages
    kind: str                   # launch | constant | cuda | native (a C/C++ CPU source: no CUDA block cap)
    spans: tuple[Span, ...]     # character spans of every literal that holds the value
    choices: tuple[int, ...]    # neighbouring values, nearest first


def role_of(name: str) -> str | None:
    """The kind of knob a name denotes, or None where it is not a tuning parameter."""
    if name == "num_warps":
        return "warps"
    if name == "num_stages":
        return "stages"
    if not _ALL_CAPS.fullmatch(name) or name in NOT_TUNABLE:
        return None
    if "WARPS" in name:
        return "warps"
    if "STAGES" in name:
        return "stages"
    if any(w in name for w in ("UNROLL", "VEC", "ITEMS", "PER_THREAD")):
        return "unroll"
    if "THREAD" in name or name == "TPB":
        return "threads"
    if "GROUP" in name or "SPLIT" in name:
        return "group"
    if any(w in name for w in ("BLOCK", "TILE", "CHUNK")) or re.fullmatch(r"[BTW][MNK]|BS", name):
        return "block"
    return None


def choices_for(value: int, role: str, cuda: bool = False) -> tuple[int, ...]:
    """Neighbouring values: the next rungs of a ladder, powers of two up and down, or +-25% for other values."""
    if role in LADDERS:
        ladder = LADDERS[role]
        below = [v for v in ladder if v < value]
        above = [v for v in ladder if v > value]
        return tuple(([below[-1]] if below else []) + ([above[0]] if above else []))
    if value <= 0:
        return ()
    lo, hi = BOUNDS[role]
    if cuda and role == "block":
        hi = min(hi, CUDA_BLOCK_MAX)
    if value & (value - 1) == 0:
        raw = [value // 2, value * 2]
    else:
        raw = [min(round(value * 0.75), value - 1), max(round(value * 1.25), value + 1)]
    return tuple(v for v in raw if lo <= v <= hi and v != value)


def find_tunables(source: str) -> list[Tunable]:
    """Every tunable of a Python source, in source order; [] where the source does not parse."""
    try:
        tree = parse_source(source)
    except (SyntaxError, ValueError):
        return []
    return _Finder(source, tree).run()


def rewrite(source: str, changes: Iterable[tuple[Tunable, int]]) -> str:
    """The source with each tunable's literals replaced by its new value; nothing else changes."""
    edits = sorted(((s, e, str(v)) for t, v in changes for s, e in t.spans), reverse=True)
    for (s, _, _), (_, e2, _) in zip(edits, edits[1:]):
        if e2 > s:
            raise ValueError("two changes touch the same literal")
    pieces: list[str] = []
    end = len(source)
    for s, e, text in edits:
        pieces += [source[e:end], text]
        end = s
    pieces.append(source[:end])
    return "".join(reversed(pieces))


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _ref_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Finder:
    def __init__(self, source: str, tree: ast.Module) -> None:
        self.source = source
        self.tree = tree
        self.line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(source)]
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node

    def run(self) -> list[Tunable]:
        found = self._launch_literals() + self._constants() + self._cuda_literals()
        found = self._unlink_shared(found)
        found.sort(key=lambda item: item[4][0])
        lines = [self.source.count("\n", 0, spans[0][0]) + 1 for *_, spans in found]
        repeated = {n for n, c in Counter(item[0] for item in found).items() if c > 1}
        return [
            Tunable(
                label=f"{name}@L{line}" if name in repeated else name,
                name=name, value=value, role=role, kind=kind, spans=spans,
                choices=choices_for(value, role, cuda=kind == "cuda"),
            )
            for (name, value, role, kind, spans), line in zip(found, lines)
        ]

    # -- positions -------------------------------------------------------------------------------------------------

    def _offset(self, lineno: int, col_bytes: int) -> int:
        start = self.line_starts[lineno - 1]
        prefix = self.source[start:start + col_bytes].encode("utf-8")[:col_bytes]
        return start + len(prefix.decode("utf-8", errors="ignore"))

    def _span(self, node: ast.expr) -> Span:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset)

    def _scope(self, node: ast.AST) -> ast.AST:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return node
        return node

    # -- the three sources of tunables ---------------------------------------------------------------------------

    def _launches(self) -> list[ast.Call]:
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]

    def _launch_literals(self) -> list[_Found]:
        found: list[_Found] = []
        for call in self._launches():
            kwargs = [(k.arg, v, k.value) for k in call.keywords
                      if k.arg and role_of(k.arg) and (v := _int_literal(k.value)) is not None]
            values = Counter(v for _, v, _ in kwargs)
            for name, value, node in kwargs:
                linked: list[Span] = []
                if name.isupper() and values[value] == 1:
                    linked = [self._span(c) for c in self._grid_literals(call, value)]
                found.append((name, value, role_of(name) or "", "launch", (self._span(node), *linked)))
        return found

    def _grid_literals(self, call: ast.Call, value: int) -> list[ast.Constant]:
        assert isinstance(call.func, ast.Subscript)
        grid = call.func.slice
        exprs: list[ast.AST] = [grid]
        names = {n.id for n in ast.walk(grid) if isinstance(n, ast.Name)}
        if names:
            for node in ast.walk(self._scope(call)):
                if isinstance(node, ast.Assign) and self._scope(node) is self._scope(call):
                    if any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
                        exprs.append(node.value)
        return [c for e in exprs for c in ast.walk(e) if isinstance(c, ast.Constant) and _int_literal(c) == value]

    def _constants(self) -> list[_Found]:
        feeds: dict[str, str] = {}  # referenced name -> the launch keyword it feeds
        for call in self._launches():
            for k in call.keywords:
                if k.arg and role_of(k.arg):
                    for n in ast.walk(k.value):
                        ref = _ref_name(n)
                        if ref and _ALL_CAPS.fullmatch(ref):
                            feeds.setdefault(ref, k.arg)
        found: list[_Found] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value_node = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value_node = node.target, node.value
            else:
                continue
            name, value = _ref_name(target), _int_literal(value_node)
            if name in feeds and value is not None:
                role = role_of(feeds[name]) or ""
                found.append((name, value, role, "constant", (self._span(value_node),)))
        return found

    def _cuda_literals(self) -> list[_Found]:
        in_fstring = {id(c) for j in ast.walk(self.tree) if isinstance(j, ast.JoinedStr) for c in ast.walk(j)}
        found: list[_Found] = []
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in in_fstring:
                continue
            start, end = self._span(node)
            raw = self.source[start:end]
            kind = "cuda" if "__global__" in raw else "native"  # a CPU kernel's BLOCK is no threads-per-block
            for pattern in (_DEFINE, _CONSTEXPR):
                for m in pattern.finditer(raw):
                    role = role_of(m.group(1))
                    if role:
                        span = (start + m.start(2), start + m.end(2))
                        found.append((m.group(1), int(m.group(2)), role, kind, (span,)))
        return found

    @staticmethod
    def _unlink_shared(found: Sequence[_Found]) -> list[_Found]:
        """A grid literal claimed by two tunables belongs to neither: changing it for one would break the other."""
        claims = Counter(s for *_, spans in found for s in set(spans))
        return [(name, value, role, kind, (spans[0], *(s for s in spans[1:] if claims[s] == 1)))
                for name, value, role, kind, spans in found]
