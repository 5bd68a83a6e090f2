"""What the commands share: exit codes, the corpus flags, the corpus report's warnings on stderr, progress bars."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from tqdm import tqdm

from core.errors import UserError, shorten
from core.training.config import COLUMN_SETTINGS, GENERAL_PARAMS
from core.training.params import Param

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by Ctrl-C (128 + SIGINT)
K_PARAM = dataclasses.replace(GENERAL_PARAMS["eval_k"], name="k")  # evaluate --k: a run's eval_k, by its flag's name
DISCOUNT = GENERAL_PARAMS["discount"]  # evaluate --discount: a run's, by the same name
LIST_SHAPE = GENERAL_PARAMS["list_shape"]  # evaluate --list-shape: a run's, by the same name
DROP_LEAKED_HELP = GENERAL_PARAMS["drop_leaked"].help  # --drop-leaked of the commands without a run's flags


class TqdmPhases:
    """A PhaseProgress that opens one tqdm bar per phase label on stderr."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.bar = None

    def __call__(self, label: str, done: int, total: int) -> None:
        if label != self.label:
            self.close()
            self.label = label
            self.bar = tqdm(total=total, desc=label, file=sys.stderr, leave=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar, self.label = None, None


def corpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", help="CSV / TSV / JSONL / Parquet file: labelled texts (text, label), pairs (text1, "
                   "text2, score or label) or ranked lists (list_id, rank, text)")
    column_flags(p)
    p.add_argument("--kind", default=None, metavar="labelled|pairs|lists|negatives",
                   help="read the file as this kind of "
                   "corpus whatever its column names suggest, e.g. --kind labelled --text-col text1 --label-col score "
                   "(default: from the column names)")
    p.add_argument("--model", default=None, help="local directory, packaged name or hub id (default all-MiniLM-L6-v2)")
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: best available)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def column_flags(p: argparse.ArgumentParser) -> None:
    """--text-col, --label-col, --split-col and every other kind's roles (--text1-col, --score-col, --list-col, ...),
    as `train` takes them: a file in its release's own column names (SICK's sentence_A) is read by naming them."""
    for name in COLUMN_SETTINGS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, metavar="NAME",
                       help=GENERAL_PARAMS[name].help)


def columns_given(args) -> dict[str, str]:
    """The column settings given as flags, by setting name (text1_col: 'sentence_A'), for core.data.kinds.load_any."""
    return {name: getattr(args, name) for name in COLUMN_SETTINGS if getattr(args, name, None)}


def leak_arg(p: argparse.ArgumentParser) -> None:
    """--drop-leaked, for the commands that read the corpus in this process (a run's worker reads its config)."""
    p.add_argument("--drop-leaked", action="store_true", help=DROP_LEAKED_HELP)


def warn_corpus(corpus) -> None:
    """The corpus report's warnings (Latin-1 fallback, long texts, duplicates, unused split values) on stderr, as
    the Corpus page shows them: a headless run must not change what it reads without saying so either. Leakage,
    of every corpus kind, is said here, in the CLI's words (the page offers a checkbox): the target items that are
    also training items, then (pairs and lists) those that only share a text with training items."""
    for warning in corpus.report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    report = corpus.report
    if report.leaked:
        what = f"{corpus.leakage()} (e.g. {', '.join(map(quoted, report.leaked_examples))})"
        if report.leaked_dropped:
            print(f"warning: {what}; dropped from the {corpus.target_split} split (--drop-leaked).", file=sys.stderr)
        else:
            print(f"warning: {what}, so a model can score them by memory; --drop-leaked drops them.", file=sys.stderr)
    sharing = corpus.sharing()
    if sharing:
        others = report.shared - report.leaked
        scope = (f"only the {report.leaked:,} exact repeat{'s' if report.leaked > 1 else ''}, not the {others:,} "
                 f"other{'s' if others > 1 else ''}" if report.leaked
                 else "only exact repeats, of which there are none")
        print(f"warning: {sharing} (e.g. {', '.join(map(quoted, report.shared_examples))}), so a model may score "
              f"them partly by memory; --drop-leaked drops {scope}.", file=sys.stderr)


def quoted(example) -> str:
    """A leaked text, or a leaked pair as 'text1' / 'text2', quoted and cut to one line."""
    return shorten(example, 60) if isinstance(example, str) else " / ".join(shorten(t, 40) for t in example)


def kind_of(args) -> str:
    """The corpus kind `args.corpus` is read as: --kind when given (checked), else the one its columns say."""
    from core.data.kinds import checked_kind, corpus_kind, implied_kind

    return checked_kind(args.kind) or implied_kind(columns_given(args)) or corpus_kind(args.corpus)


# Flags that mean something for some corpus kinds only: the evaluation settings of a kind a reference judges (P@k,
# S@k, kNN), a list file's shape. Given for another kind they would be accepted and ignored.
FLAG_NEEDS = {"--list-shape": "list_shape", "--k": "judged", "--eval-k": "judged", "--discount": "judged",
              "--knn-metric": "judged", "--trade-off-only": "judged"}
FLAG_WHY = {"list_shape": "says what the order of a list file states", "judged": "sets how P@k / S@k and kNN of a "
            "labelled corpus are computed"}


def refuse_flags(given: dict[str, object], kind: str, whose: str) -> None:
    """One line for a flag given (not None in `given`, flag -> value) that the corpus's kind would ignore; `whose`
    names the corpus and its kind ("data.csv is a pair corpus (...)")."""
    from core.data.kinds import kind_of  # pandas: not imported where a command starts (`runs`, --help)

    spec = kind_of(kind)
    for flag, value in given.items():
        need = FLAG_NEEDS[flag]
        if value is not None and not (spec.judged if need == "judged" else need in spec.options):
            raise UserError(f"{flag} {FLAG_WHY[need]}; {whose}, so leave the flag out.")


def kind_words(args, kind: str) -> str:
    """"data.csv is a pair corpus (...)", or "--kind pairs reads data.csv as a pair corpus (...)" when forced."""
    from core.data.kinds import kind_of

    if args.kind:
        return f"--kind {kind} reads {args.corpus} as {kind_of(kind).title}"
    return f"{args.corpus} is {kind_of(kind).title}"


def load_labelled(args, why: str):
    """The labelled corpus `args.corpus` holds; a pair or list file is refused whatever columns are named (naming
    a --label-col must not turn a list's rank into a class). `why` says what needs the labels."""
    from core.data.corpus import LABELLED, load_corpus

    kind = kind_of(args)
    if kind != "labelled":
        raise UserError(f"{why}, so they need {LABELLED.title}; {kind_words(args, kind)}.")
    given = columns_given(args)
    corpus = load_corpus(args.corpus, text_col=given.get("text_col"), label_col=given.get("label_col"),
                         split_col=given.get("split_col"), drop_leaked=args.drop_leaked)
    warn_corpus(corpus)
    return corpus


def warn_line(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def add_flag(p: argparse.ArgumentParser, param: Param, help: str) -> None:
    """One flag per setting; values stay strings so TrainConfig parses them (a bad one exits 2 with one line). A
    setting's help is plain text, so its '%' is escaped for argparse, which reads it as a format."""
    help = help.replace("%", "%%")
    if param.type is bool:
        p.add_argument(param.flag, action="store_true", default=None, help=help)
    else:
        choices = f" ({'/'.join(param.choices)})" if param.choices else ""
        p.add_argument(param.flag, default=None, metavar=param.type.__name__.upper(), help=help + choices)


class RunFailed(Exception):
    """A run ended failed: exit 2 when its cause was the user's input, 1 for a crash."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
