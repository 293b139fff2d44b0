"""Parsing of LLM replies: the kernel source a coder proposes, the JSON verdict a judge returns.

Pure functions over strings. Failures are data: `extract_code` never raises, it returns a `CodeReply`
whose `source` is None and whose `problem` is one readable sentence that can go back into the next prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from evaluator.source_ast import parse_source

__all__ = ["CodeReply", "extract_code", "extract_json"]

CodeKind = Literal["block", "edits", "none"]

_PYTHON_FENCE_LANGS = frozenset({"", "python", "python3", "py", "triton"})
_FENCE_OPEN = re.compile(r"^\s*```+\s*([\w+.-]*)[^`]*$")
_FENCE_CLOSE = re.compile(r"^\s*```+\s*$")
_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_SEARCH_MARK = re.compile(r"^[ \t]*<{5,9} ?SEARCH[ \t]*$", re.MULTILINE)
_EDIT = re.compile(
    r"^[ \t]*<{5,9} ?SEARCH[ \t]*\n(.*?)^[ \t]*={5,9}[ \t]*\n(.*?)^[ \t]*>{5,9} ?REPLACE[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_CODE_START = re.compile(r"^(import |from |class |def |@|#)")


@dataclass(frozen=True, slots=True)
class CodeReply:
    """What a coder's reply yields: a parsable source, or the sentence saying why there is none."""

    source: str | None
    kind: CodeKind
    problem: str = ""
    reasoning: str = ""  # the content of <think>...</think> sections, joined; "" when none

    @property
    def ok(self) -> bool:
        return self.source is not None


@dataclass(frozen=True, slots=True)
class _Fence:
    lang: str
    body: str
    closed: bool


def extract_code(text: str, parent_source: str | None = None) -> CodeReply:
    """The Python source in an LLM reply: a fenced block, raw code, or SEARCH/REPLACE edits of the parent."""
    body, reasoning = _split_reasoning(_normalize(text))
    if _SEARCH_MARK.search(body):
        source, kind, problem = _from_edits(body, parent_source)
    else:
        source, kind, problem = _from_blocks(body)
    if source is not None:
        problem = _parse_problem(source)
        if problem:
            source = None
    return CodeReply(source=source, kind=kind if source is not None else "none",
                     problem=problem, reasoning=reasoning)


def extract_json(text: str) -> dict | None:
    """The first JSON object in a reply (bare, fenced or embedded in prose), or None when nothing parses."""
    body, _ = _split_reasoning(_normalize(text))
    attempts = [body.strip()] + [f.body.strip() for f in _fences(body)]
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", body):
        try:
            value, _ = decoder.raw_decode(body, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


# -- shared steps --------------------------------------------------------------------------------


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _split_reasoning(text: str) -> tuple[str, str]:
    """The reply without its reasoning sections, and their content.

    Handles closed `<think>` sections, a lone `</think>` (the opening tag was in the prompt template) and an
    unclosed `<think>` (the reply ran out while reasoning: everything after it is reasoning).
    """
    parts = [m.group(1).strip() for m in _THINK.finditer(text)]
    text = _THINK.sub("", text)
    lowered = text.lower()
    close = lowered.find("</think>")
    if close != -1:
        parts.insert(0, text[:close].replace("<think>", "").strip())
        text = text[close + len("</think>"):]
        lowered = text.lower()
    open_ = lowered.find("<think>")
    if open_ != -1:
        parts.append(text[open_ + len("<think>"):].strip())
        text = text[:open_]
    return text, "\n\n".join(p for p in parts if p)


def _parse_problem(source: str) -> str:
    try:
        parse_source(source)
    except SyntaxError as exc:
        return f"the code does not parse: line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. null bytes
        return f"the code does not parse: {exc}"
    return ""


def _parses(source: str) -> bool:
    return not _parse_problem(source)


# -- fenced blocks and raw code ------------------------------------------------------------------


def _fences(text: str) -> list[_Fence]:
    """Every fenced block in order; the last one may be unclosed (a truncated reply)."""
    fences: list[_Fence] = []
    lang: str | None = None
    lines: list[str] = []
    for line in text.split("\n"):
        if lang is None:
            opened = _FENCE_OPEN.match(line)
            if opened:
                lang, lines = opened.group(1).lower(), []
        elif _FENCE_CLOSE.match(line):
            fences.append(_Fence(lang, _block_text(lines), closed=True))
            lang = None
        else:
            lines.append(line)
    if lang is not None:
        fences.append(_Fence(lang, _block_text(lines), closed=False))
    return fences


def _block_text(lines: list[str]) -> str:
    text = "\n".join(lines).rstrip()
    return text + "\n" if text else ""


def _from_blocks(body: str) -> tuple[str | None, CodeKind, str]:
    fences = [f for f in _fences(body) if f.lang in _PYTHON_FENCE_LANGS]
    if fences and not fences[-1].closed and not _parses(fences[-1].body):
        return None, "none", "the reply was cut off inside a code block"
    blocks = [f.body for f in fences if f.body.strip()]
    if not blocks:
        if not _fences(body) and _MODEL_NEW.search(body):
            return _raw_code(body), "block", ""
        return None, "none", "the reply holds no code block"
    return _choose(blocks), "block", ""


def _choose(blocks: list[str]) -> str:
    """The last parsable block defining ModelNew, else the longest parsable block, else the best unparsable one."""
    with_model = [b for b in blocks if _MODEL_NEW.search(b)]
    for block in reversed(with_model):
        if _parses(block):
            return block
    parsable = [b for b in blocks if _parses(b)]
    if parsable:
        return max(parsable, key=len)
    return with_model[-1] if with_model else max(blocks, key=len)


def _raw_code(body: str) -> str:
    """A reply that is code without fences; leading prose lines are dropped when the whole does not parse."""
    source = body.strip("\n") + "\n"
    if _parses(source):
        return source
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if _CODE_START.match(line):
            tail = "\n".join(lines[i:])
            if _parses(tail):
                return tail
    return source


# -- SEARCH/REPLACE edits ------------------------------------------------------------------------


def _from_edits(body: str, parent: str | None) -> tuple[str | None, CodeKind, str]:
    if parent is None:
        return None, "none", "the reply holds SEARCH/REPLACE edits but there is no parent source to apply them to"
    edits = [(m.group(1), m.group(2)) for m in _EDIT.finditer(body)]
    if len(edits) < len(_SEARCH_MARK.findall(body)):
        return None, "none", "the reply was cut off inside a SEARCH/REPLACE edit"
    source = _normalize(parent)
    for number, (search, replace) in enumerate(edits, start=1):
        source, problem = _apply_edit(source, search, replace, number)
        if problem:
            return None, "none", problem
    return source, "edits", ""


def _apply_edit(source: str, search: str, replace: str, number: int) -> tuple[str, str]:
    """`source` with one SEARCH block replaced; exact match first, then line match ignoring surrounding spaces."""
    if not search.strip():
        return source, f"SEARCH block {number} is empty, so it does not say what to replace"
    count = source.count(search)
    if count == 1:
        return source.replace(search, replace, 1), ""
    if count > 1:
        return source, f"SEARCH block {number} matches the parent {count} times; it must match exactly once"
    wanted = [line.strip() for line in search.split("\n")]
    while wanted and not wanted[0]:
        wanted.pop(0)
    while wanted and not wanted[-1]:
        wanted.pop()
    lines = source.split("\n")
    stripped = [line.strip() for line in lines]
    starts = [i for i in range(len(lines) - len(wanted) + 1) if stripped[i:i + len(wanted)] == wanted]
    if not starts:
        return source, f"SEARCH block {number} does not match the parent"
    if len(starts) > 1:
        return source, (f"SEARCH block {number} matches the parent {len(starts)} times; "
                        "it must match exactly once")
    start = starts[0]
    new_lines = replace.split("\n")
    if new_lines and new_lines[-1] == "":
        new_lines.pop()
    return "\n".join(lines[:start] + new_lines + lines[start + len(wanted):]), ""
