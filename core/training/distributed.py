"""Rank helpers for a run trained over several processes (PyTorch DDP, started by core.jobs.ddp through torchrun):
which process this is, the device it trains on, the process group, rank 0's config and examples shared with the
others, and the callback that stops every rank at the same step.

Who does what: rank 0 alone reads the run store, evaluates, mines and saves; it broadcasts the config and the
examples, so every rank trains on the same rows, and sentence-transformers' trainer (a Hugging Face Trainer) does the
rest of DDP (sharded batches, gradient all-reduce) from the process group set up here. Without a process group
(a plain run, tests, benchmarks) every helper answers as the single process of a world of one.
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
from datasets import Dataset
from transformers import TrainerCallback

from core.errors import UserError
from core.models.loading import visible_gpus
from core.storage import key_hash

# Rank 0 loads, evaluates and mines before the other ranks' first collective (they wait in the examples broadcast),
# so a collective may wait as long as that takes on a big corpus. A rank that dies is noticed at once (its
# connection closes and torchrun's agent stops the rest), so this only bounds a rank that hangs while alive.
TIMEOUT = datetime.timedelta(hours=3)


def world_size() -> int:
    """Processes in this run's process group; 1 without one."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's global rank; 0 without a process group."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main() -> bool:
    """Whether this process is rank 0: the one that reads and writes the run store, evaluates, mines and saves."""
    return rank() == 0


def local_rank() -> int:
    """This process's rank on its machine (torchrun's LOCAL_RANK), which picks its GPU."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def rank_device(requested: str | None, nproc: int) -> str:
    """The device a process of a run over `nproc` processes per machine trains on: GPU LOCAL_RANK where CUDA is
    there (unless the run asks for the CPU), else the CPU. DDP runs on CUDA or the CPU only, so an unset device
    never picks an Apple GPU here. A machine with fewer GPUs than processes is refused: two processes on one GPU
    would each hold a whole copy of the model and its optimiser state."""
    if requested == "cpu":
        return "cpu"
    gpus = visible_gpus()
    if not gpus:
        if requested == "cuda":
            raise UserError("device cuda is not available: this machine has no CUDA device; use cpu or leave "
                            "device unset.")
        return "cpu"
    if nproc > gpus:
        raise UserError(f"nproc {nproc} asks for one GPU per process, but this machine has {gpus}; set nproc to at "
                        f"most {gpus}, or device to cpu.")
    return f"cuda:{local_rank()}"


def backend() -> str:
    """The process group's backends: gloo for CPU tensors, and NCCL for CUDA tensors where CUDA is there. One group
    serves both, so rank 0's objects (config, examples) go over gloo whatever device the run trains on."""
    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


def init() -> None:
    """Join the process group torchrun set up (its env: RANK, WORLD_SIZE, MASTER_ADDR, ...), before anything else
    talks to the other ranks. The Hugging Face trainer finds the group initialised and uses it."""
    if torch.cuda.is_available() and local_rank() < torch.cuda.device_count():
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend=backend(), timeout=TIMEOUT)


def broadcast(obj: object = None) -> object:
    """Rank 0's `obj` on every rank (pickled; the others pass nothing). Without a process group, `obj` itself."""
    if world_size() == 1:
        return obj
    box = [obj if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def share_examples(dataset: Dataset | None = None, stats: dict | None = None) -> tuple[Dataset, dict]:
    """Rank 0's mined examples (rows, column types and statistics) on every rank, so each trains on identical rows:
    mining encodes with the reference model, which only rank 0 loads. Each rank logs the rows' digest, so worker.log
    shows they agree."""
    if world_size() == 1:
        return dataset, stats
    payload = broadcast({"rows": dataset.to_dict(), "features": dataset.features, "stats": stats}
                        if is_main() else None)
    if not is_main():
        dataset = Dataset.from_dict(payload["rows"], features=payload["features"])
    log(f"{len(dataset)} examples, digest {examples_digest(dataset)}")
    return dataset, payload["stats"]


def training_ended(step: int) -> None:
    """Every rank has left training before rank 0 goes on (to evaluate and save, or to record a cancel and exit,
    upon which torchrun stops whatever rank is left); each says where it stopped."""
    log(f"training ended at step {step}")
    if world_size() > 1:
        dist.barrier()


def log(message: str) -> None:
    """A line in worker.log naming this rank, under DDP only (every rank writes to the same log)."""
    if world_size() > 1:
        print(f"[rank {rank()}] {message}", flush=True)


def examples_digest(dataset: Dataset) -> str:
    """A short fingerprint of a dataset's rows in order (what two ranks must agree on)."""
    return key_hash(dataset.to_dict())


class StopSync(TrainerCallback):
    """Every rank stops at the same step: after each optimiser step the ranks all-reduce whether any wants to stop
    (rank 0 after a cancel in the run store, any rank at the last step). A rank that stopped alone would leave the
    others waiting in the next gradient all-reduce. A stop before the last step also skips the evaluation that
    step may have been due for, on every rank, since rank 0 evaluates while the others serve it. Must come after
    the callbacks that decide to stop."""

    def on_step_end(self, args, state, control, **kwargs):
        flag = torch.tensor([int(control.should_training_stop)], device=args.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item():
            control.should_training_stop = True
            if state.global_step < state.max_steps:
                control.should_evaluate = False
        return control
