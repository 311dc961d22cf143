"""Helpers for the model, pipeline and sequence-parallel tests (no pytest imports).

Also the entry point of the sequence-parallel ranks: ``python model_support.py RANK WORLD STORE
OUT [MODE]`` joins a gloo group through a ``FileStore`` and writes what it computed to ``OUT``
with ``torch.save``, for the test process to compare with its own single-process results.
``MODE`` ``full`` (default) runs the exchanges, the transformer and the pipeline; ``comm`` only
the communicators (``comm_inputs()`` and ``attention_module()`` give both sides the same data).
``run_ranks()`` starts the ranks and collects their results.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

TESTS_DIR = Path(__file__).resolve().parent

#: The request every sequence-parallel check runs (8 x 8 = 64 image tokens at 64 x 64).
SP_PROMPT = "a red circle on the left at night"
SP_REQUEST: dict[str, Any] = {
    "height": 64,
    "width": 64,
    "num_inference_steps": 3,
    "guidance_scale": 2.5,
    "seed": 7,
}


def state_digest(state: dict[str, Any]) -> str:
    """sha256 over the names, dtypes, shapes and raw bytes of a state dict, in name order."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(bytes(tensor.view(torch.uint8).view(-1).tolist()))
    return digest.hexdigest()


@dataclass(frozen=True)
class ParsedPng:
    width: int
    height: int
    bit_depth: int
    color_type: int
    chunk_types: list[bytes]
    pixels: bytes  # RGB rows, filters undone


def parse_png(data: bytes) -> ParsedPng:
    """Parse an 8-bit RGB PNG, checking the signature and every CRC, undoing each scanline's
    filter (all five PNG filter types): an independent check of what Pillow writes."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("bad PNG signature")
    pos, chunks, idat = 8, [], b""
    header: tuple[int, ...] = ()
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        chunks.append(kind)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    if (depth, color, interlace) != (8, 2, 0):
        raise ValueError(f"not 8-bit RGB without interlace: {header}")
    raw = zlib.decompress(idat)
    stride = width * 3
    if len(raw) != (stride + 1) * height:
        raise ValueError("IDAT size does not match IHDR")
    rows: list[bytes] = []
    previous = bytes(stride)
    for row in range(height):
        line = raw[row * (stride + 1) : (row + 1) * (stride + 1)]
        current = _unfilter(line[0], line[1:], previous)
        rows.append(current)
        previous = current
    return ParsedPng(width, height, depth, color, chunks, b"".join(rows))


def _unfilter(kind: int, line: bytes, above: bytes) -> bytes:
    out = bytearray(len(line))
    for i, value in enumerate(line):
        left = out[i - 3] if i >= 3 else 0
        up = above[i]
        corner = above[i - 3] if i >= 3 else 0
        if kind == 0:
            guess = 0
        elif kind == 1:
            guess = left
        elif kind == 2:
            guess = up
        elif kind == 3:
            guess = (left + up) // 2
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            guess = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
        else:
            raise ValueError(f"unknown filter type {kind}")
        out[i] = (value + guess) & 0xFF
    return bytes(out)


def comm_inputs() -> dict[str, Any]:
    """Full (unsplit) tensors every rank and the test process build identically."""
    import torch

    gen = torch.Generator().manual_seed(3)
    return {
        "float32": torch.randn(2, 8, 4, 6, generator=gen),
        "bfloat16": torch.randn(1, 4, 6, 2, generator=gen).to(torch.bfloat16),
    }


def attention_module() -> Any:
    """A seeded self-attention block (4 heads) and its full input ``[1, 8, 16]``."""
    import torch

    from cardcage.diffusion.runtime.models.attention import Attention

    torch.manual_seed(5)
    module = Attention(16, 4)
    x = torch.randn(1, 8, 16)
    return module, x


def _comm_rank(rank: int, world: int, group: Any) -> dict[str, Any]:
    import torch
    from communicator_support import CountingCommunicator

    from cardcage.diffusion.runtime.distributed.device_communicators import (
        CpuCommunicator,
        DeviceCommunicatorBase,
    )

    results: dict[str, Any] = {}
    for cls in (DeviceCommunicatorBase, CpuCommunicator):
        comm = cls(group, unique_name="sp")
        results[f"{cls.__name__}:world"] = (comm.rank, comm.world_size)
        for name, full in comm_inputs().items():
            local = full.chunk(world, dim=1)[rank]
            by_heads = comm.all_to_all_4D(local, 2, 1)
            results[f"{cls.__name__}:{name}:by_heads"] = by_heads
            results[f"{cls.__name__}:{name}:back"] = comm.all_to_all_4D(by_heads, 1, 2)
    module, x = attention_module()
    counting = CountingCommunicator(group, unique_name="sp")
    module.communicator = counting
    with torch.inference_mode():
        results["attention"] = module(x.chunk(world, dim=1)[rank])
    results["attention_calls"] = counting.calls
    return results


def _sp_rank(rank: int, world: int, store_path: str, out_path: str, mode: str = "full") -> None:
    import torch
    import torch.distributed as dist

    from cardcage.diffusion.runtime.models.distributed import all_to_all_4D
    from cardcage.diffusion.runtime.pipelines.tiny import TinyDiffusionPipeline
    from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
    from cardcage.diffusion.runtime.platforms.testing import set_current_platform

    torch.set_num_threads(1)
    set_current_platform(CpuPlatform())
    dist.init_process_group(
        "gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world
    )
    try:
        group = dist.group.WORLD
        if mode == "comm":
            torch.save(_comm_rank(rank, world, group), out_path)
            _leave_after_every_rank_is_done()
        results: dict[str, Any] = {}
        # all_to_all_4D layout: a rank's sequence slice with every head -> every token, its heads.
        full = torch.arange(2 * 8 * 4 * 3, dtype=torch.float32).reshape(2, 8, 4, 3)
        local = full.chunk(world, dim=1)[rank]
        by_heads = all_to_all_4D(local, scatter_dim=2, gather_dim=1, group=group)
        results["a2a_by_heads"] = by_heads
        results["a2a_back"] = all_to_all_4D(by_heads, scatter_dim=1, gather_dim=2, group=group)
        # The transformer and the whole pipeline, sequence-parallel over the group.
        pipeline = TinyDiffusionPipeline.build(sp_group=group)
        results["communicator"] = type(pipeline.model.transformer.communicator).__qualname__
        model = pipeline.model
        context, mask, pooled = model.encode_prompt([SP_PROMPT])
        latents = pipeline.initial_latents(3, 1, 64, 64)
        timestep = torch.tensor([600.0])
        with torch.inference_mode():
            results["velocity"] = model.transformer(latents, timestep, context, mask, pooled)
        images = pipeline.generate(SP_PROMPT, **SP_REQUEST)
        results["pixels"] = images[0].pixels
        try:
            pipeline.generate(SP_PROMPT, height=8, width=8, num_inference_steps=1)
        except ValueError as exc:  # 1 token cannot be split across 2 ranks
            results["indivisible_error"] = str(exc)
        torch.save(results, out_path)
        _leave_after_every_rank_is_done()
    finally:  # only reached when this rank failed: the exception still ends the process non-zero
        dist.destroy_process_group()


def run_ranks(tmp_path: Path, world: int, mode: str = "full") -> list[dict[str, Any]]:
    """Run ``world`` ranks of this module in ``mode``; their results in rank order."""
    import torch

    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), *sys.path]))
    env.pop("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", None)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(TESTS_DIR / "model_support.py"),
                str(rank),
                str(world),
                str(store),
                str(tmp_path / f"rank{rank}.pt"),
                mode,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for rank, (proc, out) in enumerate(zip(procs, outputs, strict=True)):
        if proc.returncode != 0:
            raise AssertionError(f"rank {rank} failed:\n{out}")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]


def _leave_after_every_rank_is_done() -> NoReturn:
    """Wait for the other ranks, then leave without gloo's teardown.

    A rank that tears its gloo group down while a peer is still finishing can abort in C++
    ("terminate called without an active exception"): seen here under load. The results are on
    disk, every rank passed the barrier, so nothing is left that teardown would protect.
    """
    import torch.distributed as dist

    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _mode = sys.argv[5] if len(sys.argv) > 5 else "full"
    _sp_rank(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], _mode)
