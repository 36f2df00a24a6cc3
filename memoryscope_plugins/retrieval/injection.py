"""The memory block injected into a model call: a retrieved context wrapped in a template.

The adapters, `bench qa` and anything else that puts memories into a prompt render the block here,
so the text a model reads is the same whichever way it was reached:

    <long_term_memory>
    Today is 2023-06-10 Sat. Relevant memories, oldest first ([date] = when it was said):
    [2023-05-08 Mon] Caroline: I went to a LGBTQ support group yesterday (= 2023-05-07 Sun).
    </long_term_memory>

Nothing found gives "" (no empty block: a model told "here are your memories" with none below
tends to invent some).
"""

from __future__ import annotations

from typing import Any

from ..types import RetrievalResult

#: How a recalled context is wrapped before it reaches the model. ``{context}`` is replaced by
#: the engine's ready-made context (a header line plus one dated line per memory). The opening
#: tag also lets adapters recognise (and keep out of the framework's history) their own blocks.
DEFAULT_TEMPLATE = "<long_term_memory>\n{context}\n</long_term_memory>"


def check_template(template: Any) -> str:
    """`template` if it is a string holding ``{context}``; ValueError otherwise."""
    if not isinstance(template, str) or "{context}" not in template:
        raise ValueError("template must contain '{context}'")
    return template


def render_block(context: str, template: str = DEFAULT_TEMPLATE) -> str:
    """The memory block for a context string; "" when the context is blank."""
    if not context.strip():
        return ""
    return template.replace("{context}", context)


def result_block(result: RetrievalResult, template: str = DEFAULT_TEMPLATE) -> str:
    """The memory block for a retrieval result; "" when it found no memories."""
    return render_block(result.context, template) if result.memories else ""


def is_block(text: Any, template: str = DEFAULT_TEMPLATE) -> bool:
    """Whether `text` is a memory block rendered with `template`."""
    if not isinstance(text, str):
        return False
    prefix, _, suffix = template.partition("{context}")
    if prefix.strip():
        return text.startswith(prefix) and text.endswith(suffix)
    return bool(suffix.strip()) and text.endswith(suffix)
