"""``python -m cardcage.diffusion.training --output DIR``: retrain the built-in model.

With the defaults this reproduces ``cardcage/tiny-dit``'s shipped weights (same torch build,
same thread count); ``--steps`` and ``--decoder-steps`` shorten the schedule for a quick try.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .train import TrainingPlan, train


def main(argv: Sequence[str] | None = None) -> int:
    defaults = TrainingPlan()
    parser = argparse.ArgumentParser(prog="python -m cardcage.diffusion.training")
    parser.add_argument("--output", type=Path, required=True, help="model directory to write")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--decoder-steps", type=int, default=defaults.decoder_steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument(
        "--snapshot-every",
        type=int,
        default=0,
        help="also save the averaged weights to OUTPUT-stepN every N steps",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    plan = dataclasses.replace(
        defaults,
        steps=args.steps,
        decoder_steps=args.decoder_steps,
        batch_size=args.batch_size,
        seed=args.seed,
        threads=args.threads,
        snapshot_every=args.snapshot_every,
    )
    path = train(args.output, plan)
    logging.getLogger(__name__).info("wrote %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
