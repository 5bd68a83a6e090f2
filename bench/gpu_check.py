"""`make gpu-check` (`python -m bench.gpu_check`): the CUDA paths in one short script, for a machine with a GPU.

The CPU machines the project is built and tested on never run them (bf16 / fp16 training, GPU encoding and
evaluation, the quick point's cached frozen states on a GPU), so a GPU machine that is lent for a few minutes spends
them here:
1. a short run of every recipe (`python -m core train --json`, 20 steps, precision auto = bf16 where the GPU has it),
   on TREC (labelled recipes), STS-B (pair recipes; raoe_angle on SNLI, whose labels its angle term orders) and BBC
   News (crops); triplet again in fp16 and fp32, and with ATA pooling; the groups of runs go side by side, each
   group one run after another;
2. a quick margin point on TREC, twice (the second reads the cached frozen states);
3. `bench throughput --device cuda`: our encode against SentenceTransformer.encode on the GPU.
Every run's status, wall time, timings and headline figures before and after go to gpu_check.json in --out, written
after each run, so a check cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import DATA, REPO

STEPS = 20
GROUPS = [  # (corpus file, its runs: each (label, extra flags)); the groups run side by side
    ("trec.csv", [(r, ["--recipe", r]) for r in ("triplet", "contrastive", "online_contrastive", "mnrl", "cosine")]),
    ("trec.csv", [(r, ["--recipe", r]) for r in ("mgh", "listmle")]
     + [("triplet fp16", ["--recipe", "triplet", "--precision", "fp16"]),
        ("triplet fp32", ["--recipe", "triplet", "--precision", "fp32"]),
        ("triplet ata", ["--recipe", "triplet", "--pooling", "ata"])]),
    ("stsb.csv", [(r, ["--recipe", r]) for r in ("cosent", "angle", "raoe", "raoe_rank")]),
    ("snli.csv", [("raoe_angle", ["--recipe", "raoe_angle"])]),  # its angle term needs labels, which STS-B lacks
    ("bbc_news.csv", [(r, ["--recipe", r]) for r in ("crop", "dropout")]),
]
HEADLINE = ("knn_accuracy", "polarity", "similarity", "sts_spearman", "ordering_accuracy")


def _run(cmd: list[str], home: str, timeout: float) -> tuple[int, str, str, float]:
    env = {**os.environ, "CONTRASTLAB_HOME": home, "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout, done.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as exc:
        return -1, exc.stdout or "", f"timed out after {timeout:.0f} s", time.monotonic() - t0


def _figures(metrics: dict | None) -> dict:
    return {k: metrics[k] for k in HEADLINE if metrics and metrics.get(k) is not None}


class Report:
    """The check's findings, rewritten to disk after each one (threads add to it)."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock, self.data = path, threading.Lock(), {"runs": [], "quick": [], "env": {}}

    def add(self, section: str, item: dict) -> None:
        with self.lock:
            self.data[section].append(item) if isinstance(self.data[section], list) else self.data[section].update(item)
            self.path.write_text(json.dumps(self.data, indent=1, default=str), encoding="utf-8")
        print(json.dumps(item, default=str)[:600], flush=True)


def train_group(corpus: Path, runs: list[tuple[str, list[str]]], report: Report, timeout: float) -> None:
    with tempfile.TemporaryDirectory(prefix="gpu-check-home-") as home:
        for label, flags in runs:
            cmd = [sys.executable, "-m", "core", "train", str(corpus), *flags, "--max-steps", str(STEPS),
                   "--device", "cuda", "--json"]
            code, out, err, wall = _run(cmd, home, timeout)
            item = {"run": label, "corpus": corpus.name, "exit": code, "wall_s": round(wall, 1)}
            try:
                result = json.loads(out)
                item.update(status=result.get("status"), timings=result.get("timings"),
                            before=_figures(result.get("before")), after=_figures(result.get("after")))
            except json.JSONDecodeError:
                item["error"] = err.strip().splitlines()[-3:] if err.strip() else out[-400:]
            report.add("runs", item)


def quick_points(corpus: Path, report: Report, timeout: float) -> None:
    with tempfile.TemporaryDirectory(prefix="gpu-check-quick-") as home:
        for margin in ("0.3", "0.7"):
            code, out, err, wall = _run([sys.executable, "-m", "core", "quick", str(corpus), "--margin", margin,
                                         "--json"], home, timeout)
            item = {"margin": margin, "exit": code, "wall_s": round(wall, 1)}
            try:
                result = json.loads(out)
                item.update(seconds=result.get("seconds"), after=_figures(result.get("after")))
            except json.JSONDecodeError:
                item["error"] = err.strip().splitlines()[-3:]
            report.add("quick", item)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder with trec.csv, stsb.csv, snli.csv, "
                        "bbc_news.csv, sst2.csv (default: the shared data folder, or CONTRASTLAB_DATA)")
    parser.add_argument("--out", type=Path, default=Path("gpu-check"), help="folder for gpu_check.json")
    parser.add_argument("--timeout", type=float, default=150, help="seconds one run may take")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu-check: torch sees no CUDA device on this machine", file=sys.stderr)
        return 2
    missing = [name for name in {*(corpus for corpus, _ in GROUPS), "sst2.csv"} if not (args.data / name).is_file()]
    if missing:
        print(f"gpu-check: {', '.join(missing)} not found in {args.data}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report(args.out / "gpu_check.json")
    import sentence_transformers
    import transformers

    report.add("env", {"gpu": torch.cuda.get_device_name(), "bf16": torch.cuda.is_bf16_supported(),
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "sentence_transformers": sentence_transformers.__version__})
    t0 = time.monotonic()
    threads = [threading.Thread(target=train_group, args=(args.data / name, runs, report, args.timeout))
               for name, runs in GROUPS]
    threads.append(threading.Thread(target=quick_points, args=(args.data / "trec.csv", report, args.timeout)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report.add("env", {"runs_wall_s": round(time.monotonic() - t0, 1)})
    env = {**os.environ, "CONTRASTLAB_DATA": str(args.data)}
    bench = subprocess.run([sys.executable, "-m", "bench", "throughput", "--device", "cuda"], cwd=REPO, env=env,
                           capture_output=True, text=True)
    (args.out / "throughput.txt").write_text(bench.stdout + bench.stderr[-3000:], encoding="utf-8")
    print(bench.stdout)
    failed = [r["run"] for r in report.data["runs"] if r.get("status") != "done"]
    failed += [f"quick {q['margin']}" for q in report.data["quick"] if q["exit"] != 0]
    print(f"gpu-check: {len(report.data['runs'])} runs, {len(report.data['quick'])} quick points; "
          f"failed: {', '.join(failed) or 'none'}; bench throughput exit {bench.returncode}")
    return 1 if failed or bench.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
