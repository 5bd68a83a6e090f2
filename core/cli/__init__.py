"""Headless CLI (`python -m core ...`): the same code paths as the pages, progress bars on stderr, results on stdout.

Every user error prints one line to stderr and exits with status 2. Here: ``main``, which command is which
(``COMMANDS``: its function and its printer) and how a command's end becomes an exit status.

- ``common``: what the commands share: exit codes, the corpus flags, the corpus report's warnings on stderr,
  ``TqdmPhases``, ``RunFailed``.
- ``analysis``: the commands computed in this process: evaluate, layers, maps, compare, published.
- ``training``: the commands that start a background run and follow it: train, quick, crop, sweep, reproduce
  (``train_config``, ``follow``, ``progress_run``); serve, which keeps a worker warm for them.
- ``runs``: the commands over recorded runs: runs, export.
- ``generate``: generate, the language-model-written data of seeds 003 and 004.
- ``parser``: every command's flags: ``build_parser``.

Corpus reading, evaluation and export are imported inside the commands that use them: they load pandas,
scikit-learn or torch, and `python -m core runs` or a bad flag should answer at once.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable

from core.cli.analysis import (cmd_compare, cmd_evaluate, cmd_layers, cmd_maps, cmd_published, print_compare,
                               print_evaluate, print_layers, print_maps, print_published)
from core.cli.common import EXIT_INTERRUPTED, EXIT_USER_ERROR, RunFailed
from core.cli.generate import cmd_generate, print_generate
from core.cli.parser import build_parser
from core.cli.runs import cmd_export, cmd_runs, print_export, print_runs
from core.cli.training import (cmd_crop, cmd_quick, cmd_reproduce, cmd_serve, cmd_sweep, cmd_train, print_quick,
                               print_reproduce, print_serve, print_sweep, print_train)
from core.errors import UserError
from core.models.loading import setup_offline

COMMANDS: dict[str, tuple[Callable, Callable]] = {
    "evaluate": (cmd_evaluate, print_evaluate),
    "layers": (cmd_layers, print_layers),
    "maps": (cmd_maps, print_maps),
    "train": (cmd_train, print_train),
    "quick": (cmd_quick, print_quick),
    "crop": (cmd_crop, print_train),
    "sweep": (cmd_sweep, print_sweep),
    "reproduce": (cmd_reproduce, print_reproduce),
    "serve": (cmd_serve, print_serve),
    "runs": (cmd_runs, print_runs),
    "compare": (cmd_compare, print_compare),
    "export": (cmd_export, print_export),
    "published": (cmd_published, print_published),
    "generate": (cmd_generate, print_generate),
}


def _sigterm_interrupts() -> Callable[[], None]:
    """While a command runs, SIGTERM (`kill PID`, `timeout`) interrupts it as Ctrl-C does: a run it follows is
    cancelled and waited for, not left training without its CLI, and the exit status is EXIT_INTERRUPTED. Returns
    what puts the previous handler back (nothing to do off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def finite_json(value: object) -> object:
    """`value` with every non-finite float (an interval of one target, a correlation of constant scores) as None:
    JSON has no NaN or Infinity, and `json.dumps` would print them bare, which no strict reader accepts."""
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    setup_offline()
    args = build_parser().parse_args(argv)
    run, show = COMMANDS[args.command]
    restore_sigterm = _sigterm_interrupts()
    try:
        result = run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except RunFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:  # Ctrl-C outside a run's follower (which cancels the run), or a second one in it
        print("error: interrupted; a run already asked to stop still stops on its own (see: python -m core runs)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore_sigterm()
    try:
        if args.json:
            print(json.dumps(finite_json(result), allow_nan=False))
        else:
            show(result)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head` closed the pipe: the reader has what it wanted, so no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # and none when Python flushes at exit
    # a run (train, crop, quick, sweep) that ended cancelled (Ctrl-C, SIGTERM to the CLI or its worker, the page's
    # Cancel) printed its status and what it has; it exits as an interrupted command does, as reproduce does
    return EXIT_INTERRUPTED if isinstance(result, dict) and result.get("status") == "cancelled" else 0
