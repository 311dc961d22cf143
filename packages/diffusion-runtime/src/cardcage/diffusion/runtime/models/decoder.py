"""``LatentDecoder``: latents to RGB, doubling the resolution once per stage.

A small convolutional stand-in for a VAE decoder: ``conv -> (SiLU, 2x nearest upsample, conv)
per stage -> conv to 3 channels -> tanh``, then ``to_uint8`` maps ``[-1, 1]`` to ``0..255``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812

from .config import TinyDiTConfig

__all__ = ["LatentDecoder", "to_uint8"]


class LatentDecoder(torch.nn.Module):  # type: ignore[misc]
    """``[B, C, h, w]`` latents -> ``[B, 3, h * s, w * s]`` in ``[-1, 1]`` (``s`` = 2**stages)."""

    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        channels = config.decoder_channels
        self.conv_in = torch.nn.Conv2d(config.latent_channels, channels[0], 3, padding=1)
        self.stages = torch.nn.ModuleList(
            torch.nn.Conv2d(cin, cout, 3, padding=1)
            for cin, cout in zip(channels, (*channels[1:], channels[-1]), strict=True)
        )
        self.conv_out = torch.nn.Conv2d(channels[-1], 3, 3, padding=1)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(latents)
        for conv in self.stages:
            x = conv(F.interpolate(F.silu(x), scale_factor=2.0, mode="nearest"))
        return torch.tanh(self.conv_out(F.silu(x)))


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """``[B, 3, H, W]`` in ``[-1, 1]`` -> ``[B, H, W, 3]`` uint8 on the CPU."""
    scaled = ((images.detach().to(torch.float32) + 1.0) * 127.5).round().clamp(0, 255)
    return scaled.to(torch.uint8).permute(0, 2, 3, 1).contiguous().cpu()
