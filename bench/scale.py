"""A 100k-row corpus end to end (issue 13): SST-2's 67,349 training sentences plus 28,503 news headlines.

The whole path runs through the core calls the pages and the worker make: the Corpus page's load, validation report
and reference evaluation (P@k, S@k, kNN), a triplet run of 2,000 mined examples for one epoch in its own worker
process (started as the Train page starts one), the Maps page's aligned t-SNE maps of a stratified subsample, and the
export. Each phase prints its seconds and its peak RSS against the 3 GB budget: the app's phases are measured in this
process (its high-water mark reset before each, /proc/self/clear_refs), the worker's by sampling its /proc status
(VmRSS per phase every SAMPLE_S, and its VmHWM).

Baselines measured in the same run: the validation report against a plain pandas.read_csv of the same bytes (and
the 5 s aim), and the encoding throughput of encode_cached (streamed into the disk cache) against a plain
SentenceTransformer.encode of the same texts, arms interleaved (aim >= 1.0).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from bench.common import Options, data_file, header, interleaved, line, load_minilm, load_note, ratio, runs_note

T = TypeVar("T")
BUDGET = 3 * 2**30  # bytes: the peak RSS the app and the worker must each stay under
REPORT_AIM_S = 5.0
THROUGHPUT_AIM = 1.0
QUICK_ROWS = 10_000
SAMPLE_S = 0.1  # how often the worker's /proc status is read
BATCH = 64  # encode_cached's default batch size, given to SentenceTransformer.encode as well
MAP_POINTS = 2000  # the Maps page's default number of plotted texts


@dataclass
class Phase:
    where: str  # "app" or "worker"
    name: str
    seconds: float
    peak: int  # bytes
    encoded: int | None = None  # embedding cache entries the phase wrote: its encodes that missed the cache


# ---------------------------------------------------------------- the corpus


def write_corpus(dest: Path, rows: int | None = None, seed: int = 0) -> Path:
    """SST-2's train split and the sarcastic headlines as one CSV (text, label), each label prefixed by its source
    (sst2:0, sarcasm:1, ...) so the datasets' labels stay apart: four classes. `rows` keeps a seeded sample, in file
    order."""
    import pandas as pd

    sst2 = pd.read_csv(data_file("sst2.csv"))
    sst2 = sst2[sst2["split"] == "train"]
    sarcasm = pd.read_csv(data_file("sarcasm_headlines.csv"))
    frame = pd.concat([pd.DataFrame({"text": part["text"], "label": f"{source}:" + part["label"].astype(str)})
                       for source, part in (("sst2", sst2), ("sarcasm", sarcasm))], ignore_index=True)
    if rows is not None and rows < len(frame):
        frame = frame.iloc[np.sort(np.random.default_rng(seed).choice(len(frame), rows, replace=False))]
    path = dest / "sst2_sarcasm.csv"
    frame.to_csv(path, index=False)
    return path


# ---------------------------------------------------------------- peak RSS


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process in bytes, from /proc/<pid>/status."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            key, _, value = row.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def reset_peak() -> None:
    """Start this process's high-water mark afresh (Linux: clear_refs 5), so each phase's peak is its own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        raise SystemExit(f"bench scale: cannot reset the peak RSS ({exc}); it needs Linux's /proc") from None


def measured(phases: list[Phase], name: str, fn: Callable[[], T]) -> T:
    """Run one app phase in this process, recording its seconds, its own peak RSS and the encodes it wrote."""
    before = cache_entries()
    reset_peak()
    t0 = time.perf_counter()
    result = fn()
    phases.append(Phase("app", name, time.perf_counter() - t0, proc_status()["VmHWM"],
                        len(cache_entries() - before)))
    return result


def cache_entries() -> set[str]:
    """The embedding cache's entries (bodies), to count the encodes a phase wrote."""
    from core.storage import cache_dir

    folder = cache_dir("embeddings")
    return {p.name for p in folder.glob("*.npy")} if folder.exists() else set()


def follow_worker(store, run_id: str, pid: int, phases: list[Phase]) -> tuple[object, int]:
    """Wait for the run, sampling its worker every SAMPLE_S: seconds and peak VmRSS per reported phase (the part
    before the first ':'), and the worker's last VmHWM read (its peak RSS up to then)."""
    from core.jobs.launch import poll

    seconds: dict[str, float] = {}
    peaks: dict[str, int] = {}
    hwm, last = 0, time.perf_counter()
    while True:
        run = poll(store, run_id)
        now = time.perf_counter()
        phase = str(run.progress.get("phase") or "starting (imports)").split(":")[0]
        seconds[phase] = seconds.get(phase, 0.0) + now - last
        last = now
        try:
            status = proc_status(pid)
            hwm = max(hwm, status["VmHWM"])
            peaks[phase] = max(peaks.get(phase, 0), status["VmRSS"])
        except (FileNotFoundError, ProcessLookupError, KeyError):  # gone, or a zombie without Vm lines
            pass
        if not run.active:
            break
        time.sleep(SAMPLE_S)
    phases += [Phase("worker", f"train: {phase}", s, peaks.get(phase, 0)) for phase, s in seconds.items()]
    return run, hwm


# ---------------------------------------------------------------- the run


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MB"


def _encode_arms(model, texts: list[str], quick: bool) -> tuple[dict, dict, float]:
    """encode_cached streaming a fresh entry (its entry deleted before each repeat) against
    SentenceTransformer.encode of the same texts, interleaved: (median seconds, all runs, max |difference|)."""
    from core.models.encode import encode_cached
    from core.models.loading import model_fingerprint
    from core.storage import cache_dir

    fingerprint = model_fingerprint(model)
    kept = cache_entries()
    out: dict[str, np.ndarray] = {}

    def ours() -> None:
        for entry in cache_dir("embeddings").glob(f"{fingerprint}-*"):
            if entry.name.removesuffix(".json") not in kept:
                entry.unlink()
        out["ours"] = encode_cached(model, texts, fingerprint=fingerprint, batch_size=BATCH)

    def theirs() -> None:
        out["theirs"] = model.encode(texts, batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True)

    t, runs = interleaved({"ours": ours, "theirs": theirs}, repeats=2 if quick else 3,
                          warmup={"model": lambda: model.encode(texts[:BATCH], batch_size=BATCH)},
                          budget_s=120 if quick else 600)
    return t, runs, float(np.abs(out["ours"] - out["theirs"]).max())


def run(opts: Options) -> None:
    import io

    import pandas as pd
    import torch

    from core.analysis.maps import map_data
    from core.data.content import persist_table
    from core.data.corpus import build_corpus, detect_columns
    from core.data.kinds import table_kind
    from core.data.table import read_table
    from core.evaluation.evaluate import EvalSettings, evaluate
    from core.jobs.launch import start
    from core.models.encode import count_overlong
    from core.models.loading import DEFAULT_MODEL, load_model
    from core.runs.export import export_run
    from core.runs.store import RunStore
    from core.storage import exports_dir
    from core.training.config import TrainConfig

    phases: list[Phase] = []
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        path = write_corpus(Path(tmp), QUICK_ROWS if opts.quick else None)
        data = path.read_bytes()

        def report():
            """The Corpus page: parse the upload, tell its kind and columns, build the corpus (the validation)."""
            t0 = time.perf_counter()
            df, warnings = read_table(data, path.name)
            timings["parse"] = time.perf_counter() - t0
            table_kind(df)
            built = build_corpus(df, detect_columns(df), name=path.stem, warnings=warnings)
            built.fingerprint  # the page's session keys hash the corpus
            return df, built

        def started() -> tuple[str, int]:
            """The Train page: save the uploaded table for the worker, create the run, start its worker."""
            columns = detect_columns(df)
            cfg = TrainConfig(corpus=str(persist_table(df, astuple(columns))), text_col=columns.text,
                              label_col=columns.label, split_col=columns.split, recipe="triplet", margin=0.1, distance="cosine",
                              examples=2000, epochs=1.0, batch_size=32, seed=0, device="cpu")
            run_id = store.create("train", cfg.to_dict())
            return run_id, start(store, run_id)

        def maps():
            """The Maps page: the run's model beside its reference, aligned t-SNE maps of a stratified subsample."""
            return map_data(model, load_model(finished.artefacts["model"], "cpu"), corpus, "tsne",
                            max_points=MAP_POINTS)

        model = measured(phases, "load the model", load_minilm)
        df, corpus = measured(phases, "load + validation report", report)
        texts = corpus.train_texts + corpus.test_texts
        overlong = measured(phases, "over-long count (report card)", lambda: count_overlong(model, texts))
        metrics = measured(phases, "reference evaluation",
                           lambda: evaluate(model, model, corpus, EvalSettings(), model_name=DEFAULT_MODEL))
        store = RunStore()
        run_id, pid = measured(phases, "start the run (save table, spawn)", started)
        t_worker, before = time.perf_counter(), cache_entries()
        finished, worker_hwm = follow_worker(store, run_id, pid, phases)
        worker_s, worker_encoded = time.perf_counter() - t_worker, len(cache_entries() - before)
        if finished.status != "done":
            raise RuntimeError(f"the training run ended {finished.status}: {finished.error}")
        drawn = measured(phases, f"maps (t-SNE, {MAP_POINTS:,} points)", maps)
        exported = measured(phases, "export (model zip, embeddings)", lambda: export_run(store, run_id, exports_dir()))

        # Baselines, measured here: plain parsing of the same bytes; plain encoding of the same texts.
        t_report, report_runs = interleaved({"report": report, "read_csv": lambda: pd.read_csv(io.BytesIO(data))},
                                            repeats=3)
        rows = np.random.default_rng(0).choice(len(texts), min(1000 if opts.quick else 4000, len(texts)),
                                               replace=False)
        sample = [texts[i] for i in np.sort(rows)]
        t_enc, enc_runs, diff = _encode_arms(model, sample, opts.quick)

    app_peak = max(p.peak for p in phases if p.where == "app")
    run_timings = (finished.progress.get("summary") or {}).get("timings", {})
    header(f"scale: a {len(df):,}-row corpus end to end (SST-2 train + sarcastic headlines, 4 labels)",
           f"all-MiniLM-L6-v2 on CPU, torch threads {torch.get_num_threads()} (the worker: its default); "
           f"{len(corpus.train_texts):,} train / {len(corpus.test_texts):,} {corpus.target_split} texts; app = this "
           f"process making the pages' core calls, worker = the run's own process; {load_note()}")
    line("phase", f"{'where':<7} {'seconds':>8}  {'peak RSS':>9}  of 3 GB  encodes")
    for p in phases:
        line(p.name[:34], f"{p.where:<7} {p.seconds:8.1f}  {_mb(p.peak):>9}  {p.peak / BUDGET:6.2f}  "
                          + ("" if p.encoded is None else f"{p.encoded:7d}"))
    line("", "app: exact peak of each phase; worker: VmRSS sampled every "
             f"{SAMPLE_S:g} s; encodes: embedding cache entries written (0 = all from the cache)")
    line("peak RSS app / worker", f"{_mb(app_peak)} / {_mb(worker_hwm)} (the worker's VmHWM, last read); of 3 GB "
                                  f"{app_peak / BUDGET:.2f} / {worker_hwm / BUDGET:.2f}")
    line("worker", f"{worker_s:.1f} s in all, {worker_encoded} encodes; the run's own timings (s): "
                   + ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in run_timings.items()))
    line("validation report", f"{t_report['report']:.2f} s (parse {timings['parse']:.2f} s; aim <= "
                              f"{REPORT_AIM_S:g} s); pandas.read_csv alone {t_report['read_csv']:.2f} s; ratio "
                              f"{ratio(t_report['report'], t_report['read_csv'])}")
    line("  all repeats (s, in order)", runs_note(report_runs, fmt="{:.2f}"))
    line("over-long texts", f"{overlong:,} of {len(texts):,} (filled in after the report)")
    line("reference evaluation", f"P@16 {metrics['polarity']:.1f}, S@16 {metrics['similarity']:.1f}, kNN "
                                 f"{100 * metrics['knn_accuracy']:.1f}% on {metrics['n_queries']:,} targets, pool "
                                 f"{metrics['n_pool']:,}, kNN base {metrics['n_knn_train']:,}")
    line("maps", f"{len(drawn):,} of {drawn.n_available:,} texts; kNN {100 * drawn.ref_knn:.1f}% -> "
                 f"{100 * drawn.tuned_knn:.1f}%")
    line("export", ", ".join(exported["files"]))
    line("encoding: encode_cached (streamed)", f"{len(sample) / t_enc['ours']:.0f} texts/s  ({t_enc['ours']:.2f} s)")
    line("encoding: SentenceTransformer.encode",
         f"{len(sample) / t_enc['theirs']:.0f} texts/s  ({t_enc['theirs']:.2f} s)")
    line("  all repeats (s, in order)", runs_note(enc_runs))
    line("  ratio ours / theirs (texts/s)", f"{ratio(t_enc['theirs'], t_enc['ours'])}  (aim >= {THROUGHPUT_AIM:g}; "
                                           f"{len(sample):,} texts, batch {BATCH})")
    line("  same embeddings", f"{'yes' if diff < 1e-4 else 'NO'} (max |diff| {diff:.1e})")
