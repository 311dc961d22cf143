"""Train ``cardcage/tiny-dit`` on drawn scenes: the decoder first, then the prompt encoder and
the latent transformer with the flow-matching objective the runtime's sampler integrates.

The model's latent is the image averaged over ``vae_scale_factor``-pixel blocks (there is no
learned encoder): a 64x64 scene is a 3x16x16 latent. So the decoder is trained alone, as a
4x upsampler of averaged scenes (with a little noise, for the transformer's imperfect samples),
and the transformer learns, for ``x_s = (1 - s) x0 + s noise``, the velocity ``noise - x0`` at
timestep ``1000 s``: exactly what ``FlowMatchEulerSampler`` steps along. One prompt in ten is
emptied so classifier-free guidance has an unconditioned branch, and the place and the
background are each left out of one caption in ten, so partial prompts draw something sensible.

Everything random comes from ``seed`` (scenes, noise, initial weights) and the thread count is
fixed, so a run reproduces its weights on the same torch build. The transformer and encoder
are saved as an exponential moving average of their training weights, the usual fix for the
noise a short schedule leaves in them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import random
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from tqdm import tqdm

from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.models.config import TinyDiTConfig
from cardcage.diffusion.runtime.models.tiny_dit import TinyDiffusionModel

from .scenes import STOPWORDS, Scene, random_scene, vocabulary

__all__ = ["TrainingPlan", "model_config", "scene_batch", "train"]

logger = logging.getLogger(__name__)

IMAGE_SIZE = 64


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """Every number a run depends on; the defaults make the shipped weights."""

    seed: int = 20261202
    #: torch's intra-op threads. One: the ops are small, and on a 2-core machine shared with
    #: other jobs two threads made each step about 4x slower (each kernel waits for its
    #: descheduled sibling); a different count may also round differently.
    threads: int = 1
    batch_size: int = 32
    decoder_batch_size: int = 16
    decoder_steps: int = 150
    decoder_lr: float = 3e-3
    steps: int = 4000
    lr: float = 1.5e-3
    warmup: int = 50
    ema_decay: float = 0.995
    drop_prompt: float = 0.1
    drop_phrase: float = 0.1
    #: also save the averaged weights every this many steps (0: only at the end), to look at
    #: a long run's pictures while it trains
    snapshot_every: int = 0


def model_config() -> TinyDiTConfig:
    """The shipped architecture: the tiny DiT with a word-level encoder and an RGB latent."""
    return TinyDiTConfig(
        text_dim=32,
        text_layers=1,
        hidden_size=64,
        vocabulary=vocabulary(),
        stopwords=STOPWORDS,
        max_prompt_words=8,
        latent_channels=3,
        decoder_channels=(32, 16),
        default_steps=8,
        default_guidance_scale=3.0,
        trained_size=(IMAGE_SIZE, IMAGE_SIZE),  # what the runtime warns about leaving
    )


def _pixels(image: object) -> torch.Tensor:
    """A Pillow RGB image -> ``[3, H, W]`` float32 in ``[-1, 1]``."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    data = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    rgb = data.view(image.height, image.width, 3).permute(2, 0, 1).to(torch.float32)
    return rgb / 127.5 - 1.0


def scene_batch(
    rng: random.Random, count: int, plan: TrainingPlan
) -> tuple[torch.Tensor, list[str]]:
    """``count`` random scenes ``[count, 3, 64, 64]`` and their (partly dropped) captions."""
    images: list[torch.Tensor] = []
    captions: list[str] = []
    for _ in range(count):
        scene: Scene = random_scene(rng)
        images.append(_pixels(scene.draw(IMAGE_SIZE)))
        if rng.random() < plan.drop_prompt:
            captions.append("")
        else:
            captions.append(
                scene.caption(
                    place=rng.random() >= plan.drop_phrase,
                    background=rng.random() >= plan.drop_phrase,
                )
            )
    return torch.stack(images), captions


def encode_latents(images: torch.Tensor, config: TinyDiTConfig) -> torch.Tensor:
    """The model's latent of ``images``: their average over ``vae_scale_factor`` blocks."""
    return F.avg_pool2d(images, config.vae_scale_factor)


def _init_weights(model: TinyDiffusionModel) -> None:
    """torch's default init, with every residual branch's gate and the output starting at 0.

    Zeroed adaLN modulations and output projection (as in DiT) make each block start as the
    identity and the first prediction 0, which lets a short schedule train stably.
    """
    transformer = model.transformer
    with torch.no_grad():
        for block in transformer.blocks:
            block.modulation.weight.zero_()
            block.modulation.bias.zero_()
        transformer.out_modulation.weight.zero_()
        transformer.out_modulation.bias.zero_()
        transformer.proj_out.weight.zero_()
        transformer.proj_out.bias.zero_()
        torch.nn.init.normal_(model.text_encoder.position_embedding, std=0.02)


def _batches(
    plan: TrainingPlan, rng: random.Random, size: int
) -> Iterator[tuple[torch.Tensor, list[str]]]:
    while True:
        yield scene_batch(rng, size, plan)


def _fuse_norms(model: TinyDiffusionModel) -> None:
    """Train every ``RMSNorm`` through ``F.rms_norm`` (one fused kernel, same function).

    The op's native forward takes five elementwise kernels, which on a shared 2-core machine
    cost more than the matrix products; what is saved is the weight, so inference still runs
    the platform's own forward.
    """
    for module in model.modules():
        if isinstance(module, RMSNorm):
            shape, eps = (module.hidden_size,), module.variance_epsilon
            module._forward_method = functools.partial(_rms_norm, module, shape, eps)


def _rms_norm(module: RMSNorm, shape: tuple[int, ...], eps: float, x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, shape, module.weight, eps)


def _lr_factor(step: int, warmup: int) -> float:
    """Linear warm-up, then constant: the moving average does the annealing.

    A schedule that does not depend on the total makes a run of N steps exactly the first N
    steps of any longer run, so a longer run's snapshot at step N is what ``--steps N`` gives.
    """
    return min(1.0, (step + 1) / warmup)


def _train_decoder(
    model: TinyDiffusionModel, plan: TrainingPlan, rng: random.Random, gen: torch.Generator
) -> float:
    decoder, config = model.decoder, model.config
    optimizer = torch.optim.AdamW(decoder.parameters(), lr=plan.decoder_lr, weight_decay=0.0)
    loss_value = float("nan")
    batches = _batches(plan, rng, plan.decoder_batch_size)
    for step in tqdm(range(plan.decoder_steps), desc="decoder", mininterval=5.0):
        for group in optimizer.param_groups:
            group["lr"] = plan.decoder_lr * _lr_factor(step, 20)
        images, _ = next(batches)
        latents = encode_latents(images, config)
        latents = latents + 0.05 * torch.randn(latents.shape, generator=gen)
        loss = F.mse_loss(decoder(latents), images)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
        if step % 50 == 0:
            logger.info("decoder step %d: loss %.4f", step, loss_value)
    return loss_value


def _train_transformer(
    model: TinyDiffusionModel,
    plan: TrainingPlan,
    rng: random.Random,
    gen: torch.Generator,
    output: Path,
) -> float:
    config = model.config
    trained = torch.nn.ModuleDict(
        {"text_encoder": model.text_encoder, "transformer": model.transformer}
    )
    ema = copy.deepcopy(trained).requires_grad_(False)
    optimizer = torch.optim.AdamW(trained.parameters(), lr=plan.lr, weight_decay=0.01)
    batches = _batches(plan, rng, plan.batch_size)
    running = float("nan")
    for step in tqdm(range(plan.steps), desc="transformer", mininterval=5.0):
        for group in optimizer.param_groups:
            group["lr"] = plan.lr * _lr_factor(step, plan.warmup)
        images, captions = next(batches)
        x0 = encode_latents(images, config)
        noise = torch.randn(x0.shape, generator=gen)
        # logit-normal noise levels (more training where the picture takes shape), as in SD3
        s = torch.sigmoid(torch.randn(x0.shape[0], generator=gen)).view(-1, 1, 1, 1)
        xs = (1.0 - s) * x0 + s * noise
        context, mask, pooled = model.encode_prompt(captions)
        velocity = model.transformer(xs, s.view(-1) * 1000.0, context, mask, pooled)
        loss = F.mse_loss(velocity, noise - x0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained.parameters(), 1.0)
        optimizer.step()
        decay = min(plan.ema_decay, (1 + step) / (10 + step))
        with torch.no_grad():
            for average, live in zip(ema.parameters(), trained.parameters(), strict=True):
                average.lerp_(live, 1.0 - decay)
        value = float(loss.detach())
        running = value if step == 0 else 0.98 * running + 0.02 * value
        if step % 100 == 0:
            logger.info("transformer step %d: loss %.4f (running %.4f)", step, value, running)
        if plan.snapshot_every and (step + 1) % plan.snapshot_every == 0:
            snapshot = copy.deepcopy(model)
            snapshot.text_encoder.load_state_dict(ema["text_encoder"].state_dict())
            snapshot.transformer.load_state_dict(ema["transformer"].state_dict())
            snapshot.save_pretrained(output.with_name(f"{output.name}-step{step + 1}"))
    trained.load_state_dict(ema.state_dict())
    return running


def train(output: Path, plan: TrainingPlan | None = None) -> Path:
    """Train a model with ``plan`` (default: the shipped one) and ``save_pretrained`` it."""
    plan = plan or TrainingPlan()
    torch.set_num_threads(plan.threads)
    torch.manual_seed(plan.seed)
    rng = random.Random(plan.seed)
    gen = torch.Generator().manual_seed(plan.seed)
    model = TinyDiffusionModel(model_config())
    _init_weights(model)
    _fuse_norms(model)
    model.train()
    count = sum(p.numel() for p in model.parameters())
    logger.info("training %d parameters with %s", count, plan)
    started = time.monotonic()
    decoder_loss = _train_decoder(model, plan, rng, gen)
    logger.info("decoder done: loss %.4f, %.0f s", decoder_loss, time.monotonic() - started)
    loss = _train_transformer(model, plan, rng, gen, output)
    logger.info("transformer done: loss %.4f, %.0f s", loss, time.monotonic() - started)
    model.eval()
    return model.save_pretrained(output)
