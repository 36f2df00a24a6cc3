"""The vectors a memory is stored with, defined once for the engine, re-embedding and migration.

A short turn says little on its own: "That fosters great teamwork.", "Yes, last week!", "That mistake
turned you into someone who double-checks everything." What it is about is the turn it answers. So a
turn with such a turn of another speaker before it (`Memory.context`) is embedded twice, from its own words
(`indexing.embedding_text`: dated, with its speaker) and from its words after the turn it answers
(`indexing.context_text`), and stored as the normalised sum, the second vector weighted by how short
the turn is: fully up to `SHORT_TURN_WORDS` words, fading to nothing at twice that (a long turn says
what it is about itself, and its context would only blur it). A later statement that shares no word
with a short reply then finds it beside what it replies to. Measured on LoCoMo and on the implicit-cue
set (docs/benchmarks.md, "A turn with the turn it answers"); the full-text index already reads every
turn with the turn it answers (`indexing.full_text`). A memory without such a turn (the first of a
conversation, an observation, an insight, a memory added directly) keeps its own vector.

Whether an embedder blends is its own property, ``turn_context`` (default true): multilingual-e5
scores all texts of a language so close together that the blend reorders its neighbours, and the
Chinese benchmark lost recall with it. The vector space's name says the recipe (`vector_space`), so
a store written with another recipe is re-embedded on open, never mixed.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .indexing import context_text, embedding_text
from .models.base import Embedder
from .storage.text_analysis import CJK
from .types import Memory

#: A turn of up to this many words is embedded with the turn it answers at full weight (see above).
SHORT_TURN_WORDS = 8
# what `vector_space` adds to the embedder's name when turns are embedded with the turn they answer
TURN_CONTEXT_SUFFIX = "+short-turn-context"
_WORD = re.compile(r"[^\W_]+")


def blends_turn_context(embedder: Any) -> bool:
    """Whether `embedder`'s turns are embedded with the turn they answer (its ``turn_context``)."""
    return bool(getattr(embedder, "turn_context", True))


def vector_space(embedder: Any) -> str:
    """The name stored with every vector: the embedder's name, plus the recipe when turns are
    blended with their context (a store of another recipe is re-embedded on open)."""
    name = str(embedder.name)
    return name + TURN_CONTEXT_SUFFIX if blends_turn_context(embedder) else name


def word_count(text: str) -> float:
    """Words of `text`: runs of letters or digits, a CJK character counting half a word (a Chinese
    word is one to three characters)."""
    count = 0.0
    for run in _WORD.findall(text):
        cjk = len(CJK.findall(run))
        count += cjk / 2 + (1 if cjk < len(run) else 0)
    return count


def context_weight(memory: Memory) -> float:
    """How much of the context vector a turn takes: 1 up to `SHORT_TURN_WORDS` words, falling in
    proportion to 0 at twice as many; 0 without a turn it answers, or when that turn is its own
    speaker's (one person's facts said one after the other are not replies to each other)."""
    if not memory.context or (memory.speaker and memory.context.startswith(f"{memory.speaker}: ")):
        return 0.0
    words = word_count(memory.content)
    return min(1.0, max(0.0, (2 * SHORT_TURN_WORDS - words) / SHORT_TURN_WORDS))


def document_vectors(embedder: Embedder, memories: Sequence[Memory]) -> np.ndarray:
    """One L2-normalised float32 vector per memory, in order (see the module docstring). One call
    to the embedder: the own texts first, then the context texts of the turns that take one."""
    own = [embedding_text(memory, embedder) for memory in memories]
    weights = [context_weight(m) if blends_turn_context(embedder) else 0.0 for m in memories]
    blended = [i for i, weight in enumerate(weights) if weight > 0]
    extra = [context_text(memories[i]) or "" for i in blended]
    vectors = np.asarray(embedder.embed(own + extra, kind="document"), dtype=np.float32)
    out = vectors[:len(own)].copy()
    if blended:
        weight = np.asarray([weights[i] for i in blended], dtype=np.float32)[:, None]
        summed = out[blended] + weight * vectors[len(own):]
        # two unit vectors of a turn and its own words with context never cancel out
        out[blended] = summed / np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12)
    return out
