"""Terminal chat with memory (``memoryscope-plugins chat``), with slash commands.

Line editing and history come from the standard library's `readline` on a terminal (no extra
dependency); when standard input is not a terminal, lines are read from it as they come, so the
chat can be driven by a pipe. Without a model the chat still records every message and shows
what memory recalls for it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from ..errors import MemoryScopeError
from ..timeparse import listing_line
from .wording import memories

if TYPE_CHECKING:
    from ..engine import MemoryScope

HELP = """Commands:
  /help                 this help
  /list [N]             the newest N memories (default 20)
  /retrieve QUERY       what memory recalls for QUERY
  /consolidate          consolidate pending messages now (needs a model)
  /reflect              turn observations into insights now (needs a model)
  /add TEXT             add a memory directly
  /delete ID            delete one memory
  /delete_all           delete every memory of this user (asks first)
  /export FILE          write this user's memories to FILE (JSON Lines)
  /clear                clear the screen and this session's short-term history (memories stay)
  /exit                 leave (also /quit, Ctrl-D)
Anything else is a message."""

NO_MODEL_NOTE = ("No model is configured, so there are no replies: replies need a model (set llm.provider and "
                 "llm.model). Each message is still recorded, and you see what memory recalls for it.")
MAX_HISTORY_MESSAGES = 20


class _Chat:
    def __init__(self, memory: "MemoryScope", user_id: str, agent_id: str, read: Callable[[str], str | None],
                 out: IO[str], interactive: bool) -> None:
        self.memory, self.user_id, self.agent_id = memory, user_id, agent_id
        self.read, self.out, self.interactive = read, out, interactive
        self.history: list[dict[str, str]] = []

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    # -- messages ---------------------------------------------------------------------------------
    def message(self, text: str) -> None:
        if self.memory.llm is None:
            self._recall_only(text)
            return
        from ..chat import stream_chat_with_memory
        self.out.write(f"{self.agent_id}> ")
        self.out.flush()
        pieces = []
        for piece in stream_chat_with_memory(self.memory, self.user_id, text, agent_id=self.agent_id,
                                             history=self.history):
            pieces.append(piece)
            self.out.write(piece)
            self.out.flush()
        self.say()
        self.history += [{"role": "user", "content": text}, {"role": "assistant", "content": "".join(pieces)}]
        self.history = self.history[-MAX_HISTORY_MESSAGES:]

    def _recall_only(self, text: str) -> None:
        result = self.memory.retrieve(self.user_id, text)
        self.memory.record(self.user_id, [{"role": "user", "content": text}], agent_id=self.agent_id)
        self.say("(recorded; no reply without a model)")
        self.say(result.context if result.context else "(memory recalls nothing for this yet)")

    # -- commands ---------------------------------------------------------------------------------
    def command(self, line: str) -> bool:
        """Run a slash command; returns False to leave the chat."""
        name, _, arg = line[1:].partition(" ")
        name, arg = name.strip().lower(), arg.strip()
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            self.say(f"unknown command /{name}; /help lists them")
            return True
        return handler(arg) is not False

    def cmd_help(self, arg: str) -> None:
        self.say(HELP)

    def cmd_exit(self, arg: str) -> bool:
        return False

    cmd_quit = cmd_exit

    def cmd_list(self, arg: str) -> None:
        limit = int(arg) if arg.isdigit() and int(arg) > 0 else 20
        items = self.memory.list(self.user_id, limit=limit)
        if not items:
            self.say("(no memories)")
        for memory in items:
            self.say(listing_line(memory))

    def cmd_retrieve(self, arg: str) -> None:
        if not arg:
            self.say("usage: /retrieve QUERY")
            return
        result = self.memory.retrieve(self.user_id, arg)
        self.say(result.context or "(no memories)")

    def _report(self, report) -> None:
        for line in report.lines() or ["nothing changed"]:
            self.say(line)

    def cmd_consolidate(self, arg: str) -> None:
        if self.memory.llm is None:
            self.say("consolidation needs a model (set llm.provider and llm.model); turns are stored as they are")
            return
        self._report(self.memory.consolidate(self.user_id))

    def cmd_reflect(self, arg: str) -> None:
        if self.memory.llm is None:
            self.say("reflection needs a model (set llm.provider and llm.model)")
            return
        self._report(self.memory.reflect(self.user_id))

    def cmd_add(self, arg: str) -> None:
        if not arg:
            self.say("usage: /add TEXT")
            return
        memory = self.memory.add(self.user_id, arg, agent_id=self.agent_id)
        self.say(f"added {memory.id}")

    def cmd_delete(self, arg: str) -> None:
        if not arg:
            self.say("usage: /delete ID")
            return
        self.memory.delete(self.user_id, arg)
        self.say(f"deleted {arg}")

    def cmd_delete_all(self, arg: str) -> None:
        count = self.memory.count(self.user_id)
        answer = self.read(f"Delete every memory of {self.user_id!r} ({memories(count)})? "
                           "Type the user id to confirm: ")
        if answer is None or answer.strip() != self.user_id:
            self.say("cancelled")
            return
        self.say(f"deleted {memories(self.memory.delete_all(self.user_id))}")

    def cmd_export(self, arg: str) -> None:
        if not arg:
            self.say("usage: /export FILE")
            return
        path = Path(shlex.split(arg)[0]).expanduser()
        self.say(f"exported {memories(self.memory.export(self.user_id, path))} to {path}")

    def cmd_clear(self, arg: str) -> None:
        self.history.clear()
        if self.interactive:
            self.out.write("\033[2J\033[H")
        self.say("short-term history cleared (memories are kept)")


def _line_reader(stream: IO[str], interactive: bool, out: IO[str]) -> Callable[[str], str | None]:
    """``read(prompt)``: `input` with readline on a terminal, plain lines from a pipe; None at EOF."""
    if interactive:
        def read_tty(prompt: str) -> str | None:
            try:
                return input(prompt)
            except EOFError:
                return None
        return read_tty

    def read_pipe(prompt: str) -> str | None:
        line = stream.readline()
        if not line:
            return None
        if prompt:
            out.write(prompt + "\n")
        return line.rstrip("\r\n")
    return read_pipe


def _enable_readline() -> Callable[[], None]:
    """Turn on line editing and a persistent history; returns the function that saves it."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline
        return lambda: None
    from ..settings import default_home
    history = default_home() / "chat_history"
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(1000)

    def save() -> None:
        try:
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)
        except OSError:
            pass
    return save


def run_chat(memory: "MemoryScope", user_id: str, agent_id: str, *, stdin: IO[str] | None = None,
             stdout: IO[str] | None = None) -> int:
    """Chat in the terminal with memory until /exit or end of input; returns the exit code (0).

    Works without a model too (records, and shows what memory recalls for each message).
    """
    stream = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    interactive = stdin is None and stream.isatty() and out.isatty()
    save_history = _enable_readline() if interactive else (lambda: None)
    read = _line_reader(stream, interactive, out)
    chat = _Chat(memory, user_id, agent_id, read, out, interactive)
    model = getattr(memory.llm, "name", None)
    chat.say(f"Chatting as {user_id!r} with {agent_id!r}" + (f" (model {model})." if model else ".")
             + " /help lists the commands.")
    if memory.llm is None:
        chat.say(NO_MODEL_NOTE)
    prompt = f"{user_id}> " if interactive else ""
    try:
        while True:
            line = read(prompt)
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not chat.command(line):
                        break
                else:
                    chat.message(line)
            except MemoryScopeError as exc:
                chat.say(f"error: {exc}")
            except KeyboardInterrupt:
                chat.say("(interrupted)")
    except KeyboardInterrupt:
        chat.say()
    finally:
        save_history()
    chat.say("bye")
    return 0
