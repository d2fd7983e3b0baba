"""Time one KV block's copy between GPU and host memory (CUDA only), for the transfer
times of ``kvoffload traffic`` (``docs/traffic.md``).

Run from the repository root on a machine with CUDA::

    python benchmarks/bench_block_copy.py

Copies a block of ``--bytes`` (default 167,772,160: a 512-token block of LLaMA2-70B's KV
cache in fp16) from the GPU to host memory (a store) and back (a load), pinned and
pageable, 20 timed copies each after 3 warm-ups, timed with CUDA events; prints the
median with the spread and the rate in GB/s (1e9 bytes a second).
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=167_772_160)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench_block_copy: needs CUDA", file=sys.stderr)
        return 2
    size = args.bytes
    gpu = torch.full((size,), 7, dtype=torch.uint8, device="cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, {size:,} bytes")
    for pinned in (True, False):
        host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
        for name, target, source in (("store (GPU to host)", host, gpu),
                                     ("load (host to GPU)", gpu, host)):
            times = []
            for round_ in range(23):
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # torch leaves Event unannotated
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # torch leaves Event unannotated
                start.record()
                target.copy_(source, non_blocking=pinned)
                end.record()
                torch.cuda.synchronize()
                if round_ >= 3:
                    times.append(start.elapsed_time(end))
            median = statistics.median(times)
            print(f"{'pinned' if pinned else 'pageable'} {name}: median {median:.3f} ms "
                  f"({min(times):.3f} .. {max(times):.3f}), {size / median / 1e6:.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
