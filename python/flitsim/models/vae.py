"""VAE decoders of the zoo DiTs, lowered to kernels: the decode of the final
latent into pixels that an image / video pipeline runs once, after the last
denoising step.

Every zoo DiT with an 8x VAE decodes with the same decoder shape (diffusers
``AutoencoderKL`` / ``AutoencoderKLHunyuanVideo`` configs:
``block_out_channels = (128, 256, 512, 512)``, ``layers_per_block = 2``,
32 GroupNorm groups, one single-head attention in the mid block): PixArt-alpha
and DiT (4 latent channels, ``PixArt-alpha/PixArt-XL-2-1024-MS`` and
``stabilityai/sd-vae-ft-ema`` vae/config.json), SD3 and Flux.1 (16 latent
channels, ``stabilityai/stable-diffusion-3-medium-diffusers`` and
``black-forest-labs/FLUX.1-dev`` vae/config.json), HunyuanVideo (16 latent
channels, 3-D causal convolutions 3 x 3 x 3, temporal factor 4:
``hunyuanvideo-community/HunyuanVideo`` vae/config.json; Kong et al.,
arXiv 2412.03603, section 3.1). HunyuanDiT (4 channels, sdxl-vae-fp16-fix) has
the same shape. SANA's 32x DC-AE is not modelled: its decode is empty.

Lowering (diffusers ``Decoder`` / ``HunyuanVideoDecoder3D``, eager):
``conv_in`` (C_lat -> 512), mid block (ResNet, attention, ResNet), four up
blocks of ``layers_per_block + 1`` ResNets at 512, 512, 256, 128 channels, an
upsampler (nearest x2 interpolation, then a 3 x 3 (x 3) conv) after each of the
first three (video: spatial x2 in all three, temporal x2 in the second and the
third, a causal first frame kept: ``T -> 1 + 2 (T - 1)``), then GroupNorm, SiLU,
``conv_out`` (128 -> 3). A ResNet is GroupNorm, SiLU, conv, GroupNorm, SiLU,
conv, a 1 x 1 shortcut conv when channels change, the residual add and the
division by ``output_scale_factor`` (one elementwise kernel each). A 3-D causal
conv first pads two frames in front (``F.pad``, one copy kernel).

Convolutions are implicit GEMMs (cuDNN): M = output positions, N = C_out,
K = C_in x taps, with ``taps`` set so their memory floor reads the input once
(:class:`flitsim.models.Kernels`). FLOPs = 2 x C_in x C_out x taps x output
positions (tests check the sum against that closed form).

Tiling: HunyuanVideo's pipeline as xDiT benchmarks it (``examples/
hunyuan_video_usp_example.py --enable_tiling``) decodes with diffusers'
default tiles: 16 frames (stride 12) x 256 x 256 px (stride 192); every tile
is decoded whole (the overlap is recomputed), so the decode does
~2.7x the untiled work at 1280 x 720 x 129 frames. Image pipelines decode
untiled (diffusers' default). The blending of tile seams is left out (an
elementwise pass over the output, < 1 % of the decode).
"""

from __future__ import annotations

from dataclasses import dataclass

from flitsim.models.config import ModelConfig, dtype_bytes
from flitsim.models.kernels import PARTS, Kernels, _Rows

__all__ = ["VaeDecoder", "vae_decoder", "vae_decode_kernels", "decoder_kernels"]

_OTHER = PARTS.index("other")


@dataclass(frozen=True)
class VaeDecoder:
    """Shape of a VAE decoder (see the module docstring for the sources).

    Attributes:
        latent_channels: channels of the latent it decodes.
        block_out_channels: encoder order (the decoder runs them reversed).
        layers_per_block: ResNets per up block minus one.
        temporal: True for a 3-D causal decoder (3 x 3 x 3 convs).
        time_upsample_blocks: up blocks (decoder order) whose upsampler also doubles frames.
        tile_px, tile_stride_px, tile_frames, tile_stride_frames: decode tiles
            (0: untiled), sample space.
        spatial_factor, temporal_factor: compression of the latent.
    """

    latent_channels: int
    block_out_channels: tuple[int, ...] = (128, 256, 512, 512)
    layers_per_block: int = 2
    temporal: bool = False
    time_upsample_blocks: tuple[int, ...] = ()
    tile_px: int = 0
    tile_stride_px: int = 0
    tile_frames: int = 0
    tile_stride_frames: int = 0
    spatial_factor: int = 8
    temporal_factor: int = 1


def vae_decoder(cfg: ModelConfig) -> VaeDecoder | None:
    """The decoder of a zoo DiT's VAE; None where it is not modelled (a VAE that
    is not 8x, e.g. SANA's 32x DC-AE)."""
    if cfg.vae_factor != 8:
        return None
    if cfg.temporal_factor > 1:
        # AutoencoderKLHunyuanVideo: spatial x2 upsampling in up blocks 0-2, temporal in 1-2 (log2(4) = 2 of them);
        # diffusers' default tiles (enable_tiling): 256 px stride 192, 16 frames stride 12
        return VaeDecoder(cfg.latent_channels, temporal=True, time_upsample_blocks=(1, 2), tile_px=256,
                          tile_stride_px=192, tile_frames=16, tile_stride_frames=12, temporal_factor=cfg.temporal_factor)
    return VaeDecoder(cfg.latent_channels)


def _tiles(n: int, tile: int, stride: int, extra: int = 0) -> list[int]:
    """Extents of the tiles diffusers cuts an axis of ``n`` latent positions into:
    starts 0, stride, 2 stride, ... < n, each ``tile + extra`` long (clipped at n)."""
    if tile <= 0 or n <= tile:
        return [n]
    return [min(tile + extra, n - i) for i in range(0, n, stride)]


def decoder_kernels(vae: VaeDecoder, frames: int, h: int, w: int, *, dtype: str = "fp16") -> Kernels:
    """Kernels of one untiled decode of a ``frames x h x w`` latent (frames = 1:
    an image), batch 1."""
    r = _Rows(dtype_bytes(dtype))
    kt = 27 if vae.temporal else 9
    T, H, W = frames, h, w

    def pos() -> int:
        return T * H * W

    def conv(cin: int, cout: int, taps: int = kt) -> None:
        if vae.temporal and taps > 1:
            r.ew("pad", _OTHER, (T + 2) * H * W * cin, seq=0)  # causal pad: F.pad copies the input
        r.gemm("vae_conv", _OTHER, 0, pos(), cout, cin * taps, seq=0, taps=taps)

    def norm_act(c: int) -> None:
        r.ew("group_norm", _OTHER, pos() * c, seq=0)
        r.ew("silu", _OTHER, pos() * c, seq=0)

    def resnet(cin: int, cout: int) -> None:
        norm_act(cin)
        conv(cin, cout)
        norm_act(cout)
        conv(cout, cout)
        if cin != cout:
            conv(cin, cout, 1)
        r.ew("residual_add", _OTHER, pos() * cout, reads=2, seq=0)
        r.ew("scale", _OTHER, pos() * cout, seq=0)  # / output_scale_factor

    chans = tuple(reversed(vae.block_out_channels))
    c = chans[0]
    conv(vae.latent_channels, c)
    resnet(c, c)
    # mid-block attention: GroupNorm, q / k / v, SDPA (one head of width C over all positions), out, residual
    n = pos()
    r.ew("group_norm", _OTHER, n * c, seq=0)
    for _ in range(3):
        r.gemm("qkv", _OTHER, 0, n, c, c, seq=0)
    r.attn("attention", _OTHER, 1, 1, 1, n, n, c)
    r.gemm("attn_out", _OTHER, 0, n, c, c, seq=0)
    r.ew("residual_add", _OTHER, n * c, reads=2, seq=0)
    r.ew("scale", _OTHER, n * c, seq=0)
    resnet(c, c)
    prev = c
    for i, c in enumerate(chans):
        for j in range(vae.layers_per_block + 1):
            resnet(prev if j == 0 else c, c)
        prev = c
        if i < len(chans) - 1:
            before = pos()
            if i in vae.time_upsample_blocks:
                T = 1 + 2 * (T - 1)  # the causal first frame is upsampled in space only
            H, W = 2 * H, 2 * W
            r.ew("upsample", _OTHER, before * c, reads=1, writes=max(1, round(pos() / before)), seq=0)
            conv(c, c)
    norm_act(prev)
    conv(prev, 3)
    return r.build()


def vae_decode_kernels(cfg: ModelConfig, height_px: int, width_px: int, frames: int = 1, *, batch: int = 1,
                       dtype: str = "fp16") -> Kernels:
    """Kernels of the VAE decode of ``batch`` samples of a ``height_px x width_px``
    image (``frames`` > 1: a video), tiles as the pipeline cuts them (module
    docstring), one tile after another; empty where the VAE is not modelled.
    ``dtype``: the VAE's (fp16 in the xDiT pipelines the validation rows time)."""
    vae = vae_decoder(cfg)
    if vae is None:
        return Kernels.empty()
    h, w = height_px // vae.spatial_factor, width_px // vae.spatial_factor
    lat_t = 1 if frames == 1 else (frames - 1) // vae.temporal_factor + 1
    sp = vae.tile_px // vae.spatial_factor
    st = vae.tile_stride_px // vae.spatial_factor
    tt, ts = vae.tile_frames // vae.temporal_factor, vae.tile_stride_frames // vae.temporal_factor
    ft = _tiles(lat_t, tt, ts, 1) if (vae.temporal and tt > 0 and lat_t > tt) else [lat_t]
    tiled = sp > 0 and (h > sp or w > sp)
    hs = _tiles(h, sp, st) if tiled else [h]
    ws = _tiles(w, sp, st) if tiled else [w]
    cache: dict[tuple[int, int, int], Kernels] = {}
    parts = []
    for t in ft:
        for a in hs:
            for b in ws:
                key = (t, a, b)
                if key not in cache:
                    cache[key] = decoder_kernels(vae, t, a, b, dtype=dtype)
                parts.append(cache[key])
    return Kernels.concat(parts * batch)
