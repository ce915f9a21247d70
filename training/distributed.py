"""This process's place in a `torchrun` launch, and the few things the ranks of a run must agree on.

    with Distributed("auto") as ddp:            # WORLD_SIZE, RANK, LOCAL_RANK; the process group when > 1
        ddp.from_master(lambda: lock.acquire())  # rank 0 does it; its UserError is raised on every rank
        model = ddp.wrap(model)                  # DistributedDataParallel when world > 1

PyTorch's DistributedDataParallel does the distributed work (the gradients' all-reduce in the backward);
this module only starts and ends the process group and passes rank 0's decisions and errors to every rank,
so no rank waits forever for one that failed. With one process every method is a plain call.
"""

import datetime
import math
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from cli.errors import UserError
from model.device import resolve_device


COLLECTIVE_TIMEOUT = datetime.timedelta(hours=2)


class Distributed:
    def __init__(self, device: str):
        self.world, self.rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
        if self.world > 1 and device.startswith("cuda:"):  # every rank would take that one GPU
            raise UserError(f'train.device = "{device}" puts every rank of torchrun on one GPU; use "cuda" (each rank '
                            f'takes its LOCAL_RANK\'s GPU) and choose the GPUs with CUDA_VISIBLE_DEVICES')
        # more ranks on a machine than GPUs it shows (a check of the DDP code on one GPU): they take them in turn
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.device = resolve_device(device, local_rank % gpus if gpus else local_rank)
        self.devices = 1  # the devices the ranks run on (ranks that share a GPU count it once): known in __enter__
        self.shares_gpu = False  # whether some ranks share a GPU

    @property
    def master(self) -> bool:
        return self.rank == 0

    def __enter__(self) -> "Distributed":
        if self.world > 1:
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            # rank 0 alone prepares a new corpus and times the budget's trial while the others wait in a collective:
            # NCCL's 10 minutes would kill a first run on a large corpus, so the wait is COLLECTIVE_TIMEOUT
            store = next(dist.rendezvous("env://", self.rank, self.world, timeout=COLLECTIVE_TIMEOUT))[0]
            store.set_timeout(COLLECTIVE_TIMEOUT)
            names = device_names(store, self.rank, self.world, device_name(self.device))
            self.devices = len(set(names))
            # NCCL refuses two ranks on one GPU; gloo moves their CUDA tensors through the host. Asked by the GPUs'
            # UUIDs: a launcher that shows each rank its own GPU alone (device_count() 1) shares none
            self.shares_gpu = self.device.type == "cuda" and self.devices < self.world
            backend = "nccl" if self.device.type == "cuda" and not self.shares_gpu else "gloo"
            dist.init_process_group(backend=backend, store=store, rank=self.rank, world_size=self.world,
                                    timeout=COLLECTIVE_TIMEOUT)  # fmt: skip
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        if self.world > 1:
            if error_type is None:
                dist.barrier()  # no rank tears the group down while another still uses it
            dist.destroy_process_group()

    def from_master(self, work):
        """Run `work()` on rank 0 and return its result on every rank (a barrier too); a UserError there is
        raised on every rank."""
        result, error = None, None
        if self.master:
            try:
                result = work()
            except UserError as e:
                error = e
        if self.world > 1:
            box = [(result, None if error is None else str(error))]
            dist.broadcast_object_list(box, src=0)
            result, message = box[0]
            if message is not None and not self.master:
                raise UserError(message)
        if error is not None:
            raise error
        return result

    def master_first(self, work):
        """Run `work()` on rank 0, then (once it succeeded) on the other ranks; each rank's own result."""
        result = self.from_master(work)
        return result if self.master else work()

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """`model` in DistributedDataParallel when there are several processes."""
        if self.world == 1:
            return model
        # the gradients are views into DDP's all-reduce buckets: one copy of them, not two
        return DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                   gradient_as_bucket_view=True)

    def mean_and_stop(self, value: torch.Tensor, signum: int | None) -> tuple[float, int | None]:
        """The mean of `value` over the ranks, and the signal any rank caught: they stop at the same step.
        The loop's one host-device sync."""
        if self.world > 1:
            stop = torch.tensor(signum or 0, device=self.device)
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            value = value.clone()
            dist.all_reduce(value)
            value, signum = value / self.world, int(stop.item()) or None
        return value.item(), signum

    def gather(self, obj) -> list:
        """Every rank's `obj`, in rank order."""
        if self.world == 1:
            return [obj]
        objects = [None] * self.world
        dist.all_gather_object(objects, obj)
        return objects

    def worst(self, values: list[float]) -> list[float]:
        """Each of `values` as the worst rank has it: a NaN or an infinity on any rank, else the largest. Every
        rank then takes the same decision on them (a NaN on one rank stops all, not that rank alone)."""
        if self.world == 1:
            return values
        ranks = self.gather(values)
        return [next((v for v in column if not math.isfinite(v)), max(column)) for column in zip(*ranks)]

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def device_name(device: torch.device) -> str:
    """What tells devices apart across the ranks of a launch: a GPU's UUID (the same GPU under every
    CUDA_VISIBLE_DEVICES), else this process (a CPU rank counts as a device of its own)."""
    if device.type == "cuda":
        return str(torch.cuda.get_device_properties(device).uuid)
    return f"{socket.gethostname()}:{os.getpid()}"


def device_names(store, rank: int, world: int, name: str) -> list[str]:
    """Every rank's device `name`, in rank order, through the launch's store (before any process group exists)."""
    devices = dist.PrefixStore("kogpt_devices", store)
    devices.set(str(rank), name)
    return [devices.get(str(r)).decode() for r in range(world)]
