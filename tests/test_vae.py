"""VAE decode: FLOPs of the lowering equal the closed form of the decoder's
layer shapes; the decode is one serial tail, the same time at any degree."""

import pytest

from flitsim.models.vae import VaeDecoder, decoder_kernels, vae_decode_kernels, vae_decoder
from flitsim.models.zoo import as_model


def _conv_flops_2d(c_lat: int, h: int, w: int) -> int:
    """Closed form of diffusers' AutoencoderKL decoder (block_out_channels 128, 256, 512, 512,
    layers_per_block 2): 2 C_in C_out 9 positions per 3x3 conv, 2 C_in C_out per 1x1 shortcut."""
    f, n = 0, h * w
    conv = lambda ci, co, taps=9: 2 * ci * co * taps * n  # noqa: E731
    f += conv(c_lat, 512)
    f += 4 * conv(512, 512)                               # mid block: 2 ResNets
    f += 4 * (2 * n * 512 * 512)                          # mid attention q, k, v, out
    f += 6 * conv(512, 512)                               # up block 0: 3 ResNets
    n *= 4
    f += conv(512, 512) + 6 * conv(512, 512)              # upsampler 0, up block 1
    n *= 4
    f += conv(512, 512)                                   # upsampler 1
    f += conv(512, 256) + conv(256, 256) + conv(512, 256, 1) + 4 * conv(256, 256)  # up block 2
    n *= 4
    f += conv(256, 256)                                   # upsampler 2
    f += conv(256, 128) + conv(128, 128) + conv(256, 128, 1) + 4 * conv(128, 128)  # up block 3
    f += conv(128, 3)
    return f


@pytest.mark.parametrize("model,c_lat", [("pixart-alpha", 4), ("flux.1-dev", 16)])
def test_image_decoder_flops_closed_form(model: str, c_lat: int) -> None:
    k = vae_decode_kernels(as_model(model), 1024, 1024)
    h = w = 128
    attn = 4 * 512 * (h * w) ** 2  # one head of width 512 over the 128 x 128 latent, QK^T and PV
    assert k.total_flops() == _conv_flops_2d(c_lat, h, w) + attn


def test_conv_rows_read_input_once() -> None:
    # implicit GEMM: the memory floor reads M x C_in input elements, not the M x 9 C_in of im2col
    k = decoder_kernels(VaeDecoder(4), 1, 8, 8, dtype="fp16")
    c = k.cols
    row = int(((c["taps"] == 9) & (c["k"] == 4 * 9)).nonzero()[0][0])  # conv_in: 4 -> 512
    assert int(k.bytes()[row]) == (64 * 4 + 36 * 512 + 64 * 512) * 2


def test_video_decoder_frames_and_tiles() -> None:
    cfg = as_model("hunyuan-video")
    vae = vae_decoder(cfg)
    assert vae is not None and vae.temporal
    # untiled latent of 5 frames x 32 x 32: the last conv (128 -> 3, 27 taps) runs at 1 + 4 x 4 = 17 frames x 256^2
    k = decoder_kernels(vae, 5, 32, 32)
    last = int((k.cols["kind"] == 0).nonzero()[0][-1])
    assert (int(k.cols["m"][last]), int(k.cols["n"][last]), int(k.cols["k"][last])) == (17 * 256 * 256, 3, 128 * 27)
    # 1280 x 720 x 129 frames: latent 33 x 90 x 160; diffusers tiles: temporal starts 0, 3, ..., 30 (11 tiles:
    # ten of 5 latent frames, one of 3), rows 0, 24, 48, 72 (4), columns 0, 24, ..., 144 (7)
    full = vae_decode_kernels(cfg, 720, 1280, 129)
    one = decoder_kernels(vae, 5, 32, 32)
    assert len(full) == 11 * 4 * 7 * len(one)


def test_decode_none_and_unmodelled() -> None:
    from flitsim.workloads import dit_workload

    assert len(dit_workload("pixart-alpha", 1024, decode="none").decode_kernels()) == 0
    assert len(dit_workload("sana-1600m", 1024).decode_kernels()) == 0  # 32x DC-AE: not modelled


def test_decode_is_a_serial_tail() -> None:
    import flitsim.schedules as S
    from flitsim.cost import CostModel
    from flitsim.networks import FabricNetwork
    from flitsim.workloads import dit_workload

    vae = CostModel("h100").time_ps(dit_workload("pixart-alpha", 1024, steps=2).decode_kernels("bf16"))[0]
    assert vae > 0
    for n in (1, 4):
        t = {}
        for dec in ("vae", "none"):
            s = S.build("ulysses" if n > 1 else "tensor_parallel", None,
                        dit_workload("pixart-alpha", 1024, steps=2, decode=dec), degree=n, gpu="h100")
            r = S.simulate(s) if n == 1 else s.simulate(FabricNetwork("hgx-h100", fidelity="flow"))
            t[dec] = r.makespan_ps
        assert t["vae"] - t["none"] == vae


def test_bad_decode_option() -> None:
    from flitsim.errors import ConfigError
    from flitsim.workloads import dit_workload

    with pytest.raises(ConfigError, match="decode"):
        dit_workload("pixart-alpha", 1024, decode="taesd")
