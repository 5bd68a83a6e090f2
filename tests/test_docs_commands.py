"""Every `python -m core ...` line in the README and the guide parses with the real command-line parser: a renamed
flag or command cannot leave the documentation behind."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from core.cli.parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"python -m core ([^`#\n]+)")


def _commands() -> list[tuple[str, str]]:
    found = []
    for doc in ("README.md", "docs/guide.md"):
        for line in (ROOT / doc).read_text(encoding="utf-8").splitlines():
            for match in COMMAND.finditer(line):
                found.append((doc, match.group(1).strip().rstrip(".,;)")))
    return found


@pytest.mark.parametrize("doc, command", _commands())
def test_a_documented_command_parses(doc, command):
    words = shlex.split(command.replace("...", "").replace("NAME|", "NAME"))
    if not words or words[0] not in build_parser()._subparsers._group_actions[0].choices:
        pytest.skip(f"not a command line: {command}")
    try:
        build_parser().parse_args(words)
    except SystemExit as exc:
        if len(words) == 1:  # a command named in prose ("`python -m core generate` (or the Generate page)")
            pytest.skip(f"a command named in prose: {command}")
        assert exc.code == 0, f"{doc}: `python -m core {command}` does not parse"  # --help exits 0
