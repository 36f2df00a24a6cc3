"""Counts in the command line's messages, in words that agree with them ("1 memory", "2 memories")."""

from __future__ import annotations

import sys


def count_of(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, in the plural (`plural`, else `noun` + "s") unless `count` is 1."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def memories(count: int) -> str:
    """"1 memory", "2 memories"."""
    return count_of(count, "memory", "memories")


def say_exported(counted: str, file: str) -> None:
    """"exported 3 memories to FILE". With FILE "-" the records went to standard output: the line goes to
    standard error, apart from them."""
    print(f"exported {counted} to {'standard output' if file == '-' else file}",
          file=sys.stderr if file == "-" else sys.stdout)
