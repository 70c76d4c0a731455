"""``flitsim ber``: goodput of one link direction against raw bit error rate
(FEC + link-level retry), simulated next to the go-back-N closed form."""

from __future__ import annotations

import click
from flitsim.cli._table import Printer, Table

from flitsim.cli._common import ByteSize, echo_json, friendly_errors, format_option
from flitsim.errors import number_list
from flitsim.faults import goodput_vs_ber


def _bers(text: str) -> list[float]:
    return number_list("--ber", text, "comma-separated numbers such as 0,1e-3,2e-3 (at least one, no empty items)")


@click.command("ber")
@click.argument("preset", default="nvlink5")
@click.option("--ber", "ber_list", default="0,1e-4,5e-4,1e-3,1.5e-3,2e-3,2.5e-3", show_default=True,
              help="Raw (pre-FEC) bit error rates, comma-separated, each in [0, 1) and low enough that under 99 % of maximum-size packets are corrupted (nvlink5: up to ~7e-3; higher ones are refused).")
@click.option("--bytes", "total_bytes", type=ByteSize(), default="8MiB", show_default=True,
              help="Payload moved per point (more = less sampling noise).")
@click.option("--payload", "payload_bytes", type=int, default=256, show_default=True, help="Payload per packet, bytes.")
@click.option("--seed", type=int, default=0, show_default=True, help="Error-sampling seed.")
@click.option("--nak-return-ps", type=int, default=None,
              help="NAK return time, ps (default: link latency + one flit, assumed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@format_option()
@friendly_errors
def ber_cmd(preset: str, ber_list: str, total_bytes: int, payload_bytes: int, seed: int,
            nak_return_ps: int | None, as_json: bool, fmt: str | None) -> None:
    """Goodput vs BER of a PRESET link (nvlink3/4/5): FEC codeword outcomes
    (binomial closed form), sampled replays, simulated goodput and the
    go-back-N closed form (1-P)/(1+(R/S-1)P)."""
    extra = {} if nak_return_ps is None else {"nak_return_ps": nak_return_ps}
    df = goodput_vs_ber(preset, _bers(ber_list), total_bytes=total_bytes, payload_bytes=payload_bytes,
                        seed=seed, **extra)
    if as_json or fmt == "json":
        echo_json(df.to_dict(orient="records"))
        return
    t = Table(title=f"Goodput vs BER: {preset}, {total_bytes:,} B in {payload_bytes} B packets, seed {seed}")
    for c in ("BER", "P(cw corrected)", "P(cw uncorrectable)", "P(packet)", "replays", "goodput GB/s",
              "ratio", "closed form", "p99 ns"):
        t.add_column(c, justify="right")
    for r in df.itertuples():
        t.add_row(f"{r.ber:.2e}", f"{r.codeword_corrected_prob:.4f}", f"{r.codeword_uncorrectable_prob:.3e}",
                  f"{r.packet_error_prob:.3e}", f"{r.replays:,}", f"{r.goodput_GBps:.3f}", f"{r.goodput_ratio:.4f}",
                  f"{r.closed_form_ratio:.4f}", f"{r.p99_latency_ns:.1f}")
    Printer(fmt).print(t)
