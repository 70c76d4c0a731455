"""Diffusion-transformer (DiT) image-generation workloads: resolution, denoising
steps, batch and classifier-free guidance -> image tokens, text tokens and the
effective batch one denoising step runs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from flitsim._spec import Spec
from flitsim.errors import config_error
from flitsim.models.config import ModelConfig
from flitsim.models.zoo import as_model

__all__ = ["DitWorkload", "dit_workload"]


class DitWorkload(Spec):
    """One image-generation request shape.

    Attributes:
        model: zoo name (``dit-xl/2``, ``pixart-alpha-xl/2``, ``sd3-medium``, ``flux.1-dev``, ...).
        height_px, width_px: image size, pixels; each a multiple of the model's
            ``vae_factor x patch_size`` (16 for every zoo DiT; Flux's 2x2 latent
            packing is the same as patch 2).
        steps: denoising steps (>= 1).
        batch: images per request (>= 1).
        cfg: classifier-free guidance (conditional + unconditional pass: the
            step batch doubles); None takes the model's default (True, except
            guidance-distilled Flux.1-dev).
        text_tokens: conditioning text tokens (None: the model's, e.g. 120 T5 for
            PixArt-alpha, 77 + 256 for SD3, 512 for Flux.1-dev, 0 for class-conditional DiT).
        decode: ``"vae"`` (default) runs the VAE decode of the final latent once
            after the last step (:mod:`flitsim.models.vae`; every rank decodes
            the whole output, as the xDiT pipelines the validation rows time do:
            their timed region is the whole pipeline call), ``"none"`` leaves it
            out (the denoising transformer only). The text encoders are not
            modelled (< 1 % of every validation row: a few TFLOP once per request).

    Image tokens = (H / (vae x patch)) x (W / (vae x patch)): 1024 px -> 4096,
    2048 px -> 16384, 4096 px -> 65536 (arithmetic).

    Raises:
        ConfigError: unknown model, a side not a positive multiple of the
            model's spatial factor, non-positive steps/batch, wrong types, a
            step of more than ``flitsim.limits.MAX_SEQ_TOKENS`` tokens (step
            batch x image + text tokens).
    """

    model: str
    height_px: int = Field(ge=1)
    width_px: int | None = Field(default=None, ge=1)
    steps: int = Field(default=50, ge=1)
    batch: int = Field(default=1, ge=1)
    cfg: bool | None = None
    text_tokens: int | None = Field(default=None, ge=0)
    frames: int = Field(default=1, ge=1, description="video frames (1: an image)")
    decode: Literal["vae", "none"] = "vae"

    def transformer(self) -> ModelConfig:
        """The :class:`ModelConfig` of :attr:`model`."""
        return as_model(self.model)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # checks that need the model run after field validation, so the error names one field
        cfg = self.transformer()
        if cfg.kind != "dit":
            raise config_error("DitWorkload.model", self.model, "a DiT model")
        cfg.image_tokens(self.height_px, self.width_px or self.height_px)
        if self.frames > 1 and cfg.temporal_factor == 1 and cfg.temporal_patch == 1:
            # an image DiT has no temporal axis: its "frames" would silently be frames x the image tokens
            raise config_error("DitWorkload.frames", self.frames, f"1 for {cfg.name}, an image model (a video DiT's "
                               "VAE has a temporal factor, e.g. hunyuan-video's 4)")
        cfg.latent_frames(self.frames)
        from flitsim.limits import MAX_SEQ_TOKENS

        if self.text_tokens is not None and self.text_tokens > MAX_SEQ_TOKENS:
            raise config_error("DitWorkload.text_tokens", self.text_tokens, f"0..={MAX_SEQ_TOKENS} tokens "
                               "(flitsim.limits.MAX_SEQ_TOKENS)")
        step_tokens = self.step_batch * self.joint_tokens
        if step_tokens > MAX_SEQ_TOKENS:
            # a resolution, frame count or batch far beyond any model: refused here, not as an int64
            # overflow deep in the kernel lowering
            w = self.width_px or self.height_px
            field = "batch" if self.batch > 1 and self.joint_tokens <= MAX_SEQ_TOKENS else (
                "frames" if self.frames > 1 else "width_px" if w > self.height_px else "height_px")
            raise config_error(f"DitWorkload.{field}", getattr(self, field),
                               f"tokens of one denoising step (step batch {self.step_batch} x {self.joint_tokens} "
                               f"tokens per sample) at most {MAX_SEQ_TOKENS} (flitsim.limits.MAX_SEQ_TOKENS)")

    @property
    def image_tokens(self) -> int:
        """Image (video: spatio-temporal) tokens per sample: spatial tokens x latent
        token frames (:meth:`flitsim.models.ModelConfig.latent_frames`)."""
        cfg = self.transformer()
        return cfg.image_tokens(self.height_px, self.width_px or self.height_px) * cfg.latent_frames(self.frames)

    @property
    def text_tokens_(self) -> int:
        """Text tokens per sample (the model's unless overridden)."""
        return self.transformer().text_tokens if self.text_tokens is None else self.text_tokens

    @property
    def uses_cfg(self) -> bool:
        """Whether classifier-free guidance doubles the batch."""
        return self.transformer().cfg_default if self.cfg is None else self.cfg

    @property
    def step_batch(self) -> int:
        """Samples per denoising step: ``batch x 2`` with CFG, else ``batch``."""
        return self.batch * (2 if self.uses_cfg else 1)

    @property
    def joint_tokens(self) -> int:
        """Tokens in the attention sequence per sample: image + text for joint
        models (SD3, Flux), image only otherwise (DiT; PixArt cross-attends)."""
        joint = self.transformer().dit_block in ("mmdit", "flux")
        return self.image_tokens + (self.text_tokens_ if joint else 0)

    def decode_kernels(self, dtype: str = "fp16") -> Any:
        """Kernels of the VAE decode of the request's ``batch`` outputs (empty
        with ``decode = "none"`` or a VAE that is not modelled)."""
        from flitsim.models.kernels import Kernels
        from flitsim.models.vae import vae_decode_kernels

        if self.decode == "none":
            return Kernels.empty()
        return vae_decode_kernels(self.transformer(), self.height_px, self.width_px or self.height_px, self.frames,
                                  batch=self.batch, dtype=dtype)

    def summary(self) -> dict[str, Any]:
        """Plain dict: the fields plus image/text/joint tokens, step batch, and
        total token-steps (``step_batch x joint_tokens x steps``)."""
        return {**self.to_dict(), "image_tokens": self.image_tokens, "text_tokens": self.text_tokens_,
                "joint_tokens": self.joint_tokens, "cfg": self.uses_cfg, "step_batch": self.step_batch,
                "token_steps": self.step_batch * self.joint_tokens * self.steps}


def dit_workload(model: str, resolution_px: int | tuple[int, int], *, steps: int = 50, batch: int = 1,
                 cfg: bool | None = None, text_tokens: int | None = None, frames: int = 1,
                 decode: str = "vae") -> DitWorkload:
    """Build a :class:`DitWorkload`; ``resolution_px`` is a side (square) or ``(height, width)``.

    Raises:
        ConfigError: as :class:`DitWorkload`.
    """
    if isinstance(resolution_px, tuple):
        if len(resolution_px) != 2:
            raise config_error("resolution_px", resolution_px, "an int or (height_px, width_px)")
        h, w = resolution_px
    else:
        h, w = resolution_px, None
    return DitWorkload(model=model, height_px=h, width_px=w, steps=steps, batch=batch, cfg=cfg,
                       text_tokens=text_tokens, frames=frames, decode=decode)
