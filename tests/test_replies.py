"""Reply parsing: what a coder's or judge's reply yields, and the sentence when it yields nothing."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from agents.replies import CodeReply, extract_code, extract_json

MODEL_NEW = """import torch
import triton


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * 2
"""

HELPER = """def helper(a, b):
    return a + b + 1000
"""

PARENT = """import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x):
        y = x * self.scale
        return y + 1
"""


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip(chr(10))}\n```"


# -- fenced blocks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["python", "py", "triton", "", "Python"])
def test_fenced_block_in_any_python_flavour(lang: str) -> None:
    reply = extract_code(f"Here is the kernel:\n\n{fenced(MODEL_NEW, lang)}\n\nIt doubles x.")
    assert reply == CodeReply(source=MODEL_NEW, kind="block", problem="", reasoning="")
    assert reply.ok


def test_block_defining_model_new_wins_over_a_longer_one() -> None:
    long_helper = HELPER * 1 + "\n" + "\n".join(f"X{i} = {i}" for i in range(40)) + "\n"
    assert len(long_helper) > len(MODEL_NEW)
    reply = extract_code(f"{fenced(long_helper)}\nand\n{fenced(MODEL_NEW)}\nthen\n{fenced(long_helper)}")
    assert reply.source == MODEL_NEW


def test_without_model_new_the_longest_parsable_block_wins() -> None:
    broken = "def f(:\n" + "    pass\n" * 50
    short = "x = 1\n"
    reply = extract_code(f"{fenced(short)}\n{fenced(broken)}\n{fenced(HELPER)}")
    assert reply.source == HELPER
    assert reply.kind == "block"


def test_last_parsable_model_new_block_wins_over_a_draft() -> None:
    final = MODEL_NEW.replace("x * 2", "x * 3")
    broken_final = MODEL_NEW.replace("return x * 2", "return x *")
    reply = extract_code(f"Draft:\n{fenced(MODEL_NEW)}\nFinal:\n{fenced(final)}\nOops:\n{fenced(broken_final)}")
    assert reply.source == final


def test_non_python_fences_are_ignored() -> None:
    reply = extract_code(f"{fenced('nvcc -O3 k.cu', 'bash')}\n{fenced(MODEL_NEW)}\n{fenced('int x;', 'cpp')}")
    assert reply.source == MODEL_NEW


def test_reply_with_only_prose_has_no_code_block() -> None:
    reply = extract_code("I think we should fuse the two matmuls, but I am not sure how.")
    assert reply == CodeReply(source=None, kind="none", problem="the reply holds no code block")
    assert not reply.ok


def test_reply_with_only_a_shell_block_has_no_code_block() -> None:
    reply = extract_code(fenced("pip install triton", "bash"))
    assert reply.source is None
    assert reply.problem == "the reply holds no code block"


def test_unparsable_block_names_line_and_message() -> None:
    reply = extract_code(fenced("import torch\n\nclass ModelNew(:\n    pass\n"))
    assert reply.source is None
    assert reply.kind == "none"
    assert reply.problem.startswith("the code does not parse: line 3: ")
    assert "syntax" in reply.problem.lower() or "invalid" in reply.problem.lower()


def test_crlf_reply_is_normalised() -> None:
    reply = extract_code(("Here:\n" + fenced(MODEL_NEW) + "\n").replace("\n", "\r\n"))
    assert reply.source == MODEL_NEW
    assert "\r" not in reply.source


def test_code_reply_is_frozen() -> None:
    reply = extract_code(fenced(MODEL_NEW))
    with pytest.raises(dataclasses.FrozenInstanceError):
        reply.source = "x = 1\n"  # type: ignore[misc]


# -- raw code ----------------------------------------------------------------------------------------


def test_raw_code_defining_model_new_without_fences() -> None:
    reply = extract_code("\n" + MODEL_NEW + "\n\n")
    assert reply.kind == "block"
    assert reply.source == MODEL_NEW


def test_raw_code_after_a_line_of_prose() -> None:
    reply = extract_code("Sure, here is the optimized model:\n" + MODEL_NEW)
    assert reply.source == MODEL_NEW


def test_raw_code_without_model_new_is_not_code() -> None:
    reply = extract_code(HELPER)
    assert reply.source is None
    assert reply.problem == "the reply holds no code block"


def test_raw_code_that_does_not_parse() -> None:
    reply = extract_code("class ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n")
    assert reply.source is None
    assert reply.problem.startswith("the code does not parse: line 2:")


# -- truncated replies ---------------------------------------------------------------------------


def test_truncated_block_that_parses_is_taken() -> None:
    reply = extract_code("Here it is:\n```python\n" + MODEL_NEW)
    assert reply.source == MODEL_NEW
    assert reply.kind == "block"


def test_truncated_block_that_does_not_parse_is_a_cut_off() -> None:
    cut = MODEL_NEW[: MODEL_NEW.index("return") + len("return x *")]
    reply = extract_code(f"Draft:\n{fenced(MODEL_NEW)}\nFinal:\n```python\n{cut}")
    assert reply == CodeReply(source=None, kind="none", problem="the reply was cut off inside a code block")


# -- reasoning sections --------------------------------------------------------------------------


def test_think_section_is_stripped_and_kept_as_reasoning() -> None:
    draft = fenced("class ModelNew:\n    pass\n" + "# long draft\n" * 30)
    reply = extract_code(f"<think>\nMaybe tile by 128.\n{draft}\n</think>\nFinal:\n{fenced(MODEL_NEW)}")
    assert reply.source == MODEL_NEW
    assert reply.reasoning.startswith("Maybe tile by 128.")
    assert "long draft" in reply.reasoning


def test_code_only_inside_think_is_not_an_answer() -> None:
    reply = extract_code(f"<think>{fenced(MODEL_NEW)}</think>\nI could not finish.")
    assert reply.source is None
    assert reply.problem == "the reply holds no code block"
    assert "class ModelNew" in reply.reasoning


def test_lone_closing_think_tag_ends_the_reasoning() -> None:
    reply = extract_code(f"the template opened the tag; thinking...\n</think>\n{fenced(MODEL_NEW)}")
    assert reply.source == MODEL_NEW
    assert reply.reasoning == "the template opened the tag; thinking..."


def test_unclosed_think_means_everything_after_is_reasoning() -> None:
    reply = extract_code(f"<think>let me try\n{fenced(MODEL_NEW)}")
    assert reply.source is None
    assert reply.problem == "the reply holds no code block"
    assert reply.reasoning.startswith("let me try")


def test_several_think_sections_are_all_kept() -> None:
    reply = extract_code(f"<think>first</think>\n{fenced(MODEL_NEW)}\n<THINK>second</THINK>")
    assert reply.source == MODEL_NEW
    assert reply.reasoning == "first\n\nsecond"


# -- SEARCH/REPLACE edits --------------------------------------------------------------------------


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_single_edit_is_applied_to_the_parent() -> None:
    reply = extract_code("Change the offset:\n" + edit("        return y + 1\n", "        return y + 2\n"),
                         parent_source=PARENT)
    assert reply.kind == "edits"
    assert reply.source == PARENT.replace("y + 1", "y + 2")


def test_several_edits_inside_fences_are_applied_in_order() -> None:
    edits = (edit("        self.scale = 1.0\n", "        self.scale = 2.0\n")
             + "\n" + edit("        self.scale = 2.0\n", "        self.scale = 3.0\n        self.bias = 0\n"))
    last = edit("        return y + 1\n", "        return y - 1\n")
    reply = extract_code(f"```python\n{edits}```\nand\n```\n{last}```",
                         parent_source=PARENT)
    assert reply.problem == ""
    expected = PARENT.replace("self.scale = 1.0", "self.scale = 3.0\n        self.bias = 0")
    assert reply.source == expected.replace("return y + 1", "return y - 1")
    ast.parse(reply.source)


def test_edit_matching_only_after_trimming_whitespace_keeps_replacement_lines() -> None:
    search = "def forward(self, x):   \n  y = x * self.scale\n"  # wrong indentation, trailing spaces
    replace = "    def forward(self, x):\n        y = x * self.scale * 2\n"
    reply = extract_code(edit(search, replace), parent_source=PARENT)
    assert reply.kind == "edits"
    assert reply.source == PARENT.replace("y = x * self.scale", "y = x * self.scale * 2")


def test_edit_on_a_crlf_reply_and_parent() -> None:
    reply_text = edit("        return y + 1\n", "        return y + 5\n").replace("\n", "\r\n")
    reply = extract_code(reply_text, parent_source=PARENT.replace("\n", "\r\n"))
    assert reply.source == PARENT.replace("y + 1", "y + 5")


def test_edit_that_matches_nothing_is_a_problem() -> None:
    reply = extract_code(edit("        return z\n", "        return y\n"), parent_source=PARENT)
    assert reply == CodeReply(source=None, kind="none", problem="SEARCH block 1 does not match the parent")


def test_second_edit_that_matches_nothing_is_named() -> None:
    edits = edit("        return y + 1\n", "        return y + 2\n") + edit("        return y + 1\n", "pass\n")
    reply = extract_code(edits, parent_source=PARENT)
    assert reply.problem == "SEARCH block 2 does not match the parent"


def test_ambiguous_edit_is_a_problem() -> None:
    parent = "x = 1\nx = 1\n"
    reply = extract_code(edit("x = 1\n", "x = 2\n"), parent_source=parent)
    assert reply.source is None
    assert reply.problem == "SEARCH block 1 matches the parent 2 times; it must match exactly once"


def test_ambiguous_trimmed_edit_is_a_problem() -> None:
    parent = "def f():\n    x = 1\n\ndef g():\n  x = 1\n"
    reply = extract_code(edit("x = 1  \n", "x = 2\n"), parent_source=parent)
    assert reply.problem == "SEARCH block 1 matches the parent 2 times; it must match exactly once"


def test_empty_search_is_a_problem() -> None:
    reply = extract_code(edit("", "x = 2\n"), parent_source=PARENT)
    assert reply.problem == "SEARCH block 1 is empty, so it does not say what to replace"


def test_edits_without_a_parent_are_a_problem() -> None:
    reply = extract_code(edit("        return y + 1\n", "        return y + 2\n"))
    assert reply.source is None
    assert reply.problem == ("the reply holds SEARCH/REPLACE edits but there is no parent source "
                             "to apply them to")


def test_truncated_edit_is_a_cut_off() -> None:
    text = edit("        return y + 1\n", "        return y + 2\n") + "<<<<<<< SEARCH\n        y = x\n====="
    reply = extract_code(text, parent_source=PARENT)
    assert reply.problem == "the reply was cut off inside a SEARCH/REPLACE edit"


def test_edit_that_breaks_the_syntax_is_a_parse_problem() -> None:
    reply = extract_code(edit("        return y + 1\n", "        return y +\n"), parent_source=PARENT)
    assert reply.source is None
    assert reply.kind == "none"
    assert reply.problem.startswith("the code does not parse: line 11:")


def test_parent_is_ignored_when_the_reply_is_a_whole_block() -> None:
    reply = extract_code(fenced(MODEL_NEW), parent_source=PARENT)
    assert reply.kind == "block"
    assert reply.source == MODEL_NEW


# -- JSON --------------------------------------------------------------------------------------------


def test_bare_json_object() -> None:
    assert extract_json('{"verdict": "accept", "score": 0.5}') == {"verdict": "accept", "score": 0.5}


def test_fenced_json_object() -> None:
    text = 'Verdict below.\n```json\n{"verdict": "reject", "reasons": ["uses torch.matmul"]}\n```\nThanks.'
    assert extract_json(text) == {"verdict": "reject", "reasons": ["uses torch.matmul"]}


def test_json_embedded_in_prose_with_braces_in_strings() -> None:
    text = 'My answer is {"verdict": "accept", "note": "a } inside {a string"} and that is final.'
    assert extract_json(text) == {"verdict": "accept", "note": "a } inside {a string"}


def test_first_parsable_object_after_a_stray_brace() -> None:
    text = 'Using {x} as shorthand: {"verdict": "reject", "nested": {"k": [1, 2]}} then {"other": 1}'
    assert extract_json(text) == {"verdict": "reject", "nested": {"k": [1, 2]}}


def test_json_after_reasoning_is_found_and_reasoning_json_ignored() -> None:
    text = '<think>maybe {"verdict": "accept"}</think>\n{"verdict": "reject"}'
    assert extract_json(text) == {"verdict": "reject"}


def test_json_with_crlf() -> None:
    assert extract_json('```json\r\n{\r\n  "a": 1\r\n}\r\n```') == {"a": 1}


@pytest.mark.parametrize("text", [
    "no json here at all",
    '{"verdict": "accept",}',  # trailing commas are not tolerated
    "[1, 2, 3]",  # an array is not an object
    '```json\n{"verdict": \n```',
    "",
])
def test_nothing_parsable_gives_none(text: str) -> None:
    assert extract_json(text) is None
