"""PyTorch DDP training as users run it (scripts/gpu-check): torchrun starts the ranks, NCCL is
PyTorch's own (loaded RTLD_LOCAL as a dependency of an extension module), the gradients go in
several buckets (bucket_cap_mb=1: about 7 all-reduces a step) and every step all-gathers the loss,
so that a sampling that aliases with the step's collectives misses a whole kind. Rank 0 prints the
mean loss, a parameter checksum (equal native and under commtap: same seeds, same algorithms) and
the median step time.

  python3 -m torch.distributed.run --standalone --nproc_per_node=N ddp_train.py [--steps S]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Two ranks may share one GPU (NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1).
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 16)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index], bucket_cap_mb=1)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    data = torch.Generator().manual_seed(100 + rank)
    step_s = []
    gathered = [torch.zeros(1, device=device) for _ in range(world)]
    for _ in range(args.steps):
        x = torch.randn(64, 512, generator=data).to(device)
        y = torch.randn(64, 16, generator=data).to(device)
        torch.cuda.synchronize()
        began = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        dist.all_gather(gathered, loss.detach().reshape(1))
        torch.cuda.synchronize()
        step_s.append(time.perf_counter() - began)
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    mean_loss = float(torch.cat(gathered).mean())
    kept = sorted(step_s[10:] or step_s)
    if rank == 0:
        print(f"ddp: ranks {world} steps {args.steps} loss {mean_loss:.6f} "
              f"checksum {checksum:.6f} step_ms {1e3 * kept[len(kept) // 2]:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
