"""Faults, simulated: bit errors through the FEC, link-level retry, and the
goodput-vs-BER curve of a link.

Bit errors (closed form, ``rust/src/phy/ber.rs``): a lane's raw bit error rate
gives the symbol error probability ``p_s = 1 - (1 - BER)^m`` (m-bit symbols);
symbol errors per n-symbol codeword are Binomial(n, p_s) and the RS code
corrects up to t = (n - k) / 2 of them (RS(544,514) "KP4": m = 10, t = 15;
Intel AN 846). A packet holding part of an uncorrectable codeword fails its
CRC and is replayed (go-back-N, ``rust/src/link/replay.rs``); per failure the
link loses R = serialization + latency + NAK return, so a saturated link keeps
``(1 - P) / (1 + (R/S - 1) P)`` of its goodput (P: packet error probability,
S: serialization per packet; Bertsekas & Gallager, *Data Networks*, 2nd ed.,
sec. 2.4). :func:`goodput_vs_ber` simulates that curve (seeded sampling) next
to the closed form.

Dead links and planes are :class:`flitsim.hardware.Fault` entries of a
fabric (``FabricSpec.with_faults``); see docs/faults.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Sequence

from flitsim import _core
from flitsim.errors import ConfigError
from flitsim.hardware.link_spec import LinkSpec, ReplaySpec, SerdesSpec
from flitsim.hardware.links import link_preset
from flitsim.linklab import link_transfer

if TYPE_CHECKING:
    import pandas as pd


def _link(link: LinkSpec | str) -> LinkSpec:
    if isinstance(link, str):
        return link_preset(link)
    if not isinstance(link, LinkSpec):
        raise ConfigError(f"link = {link!r}: expected a LinkSpec or a link preset name")
    return link


def fec_error_model(link: LinkSpec | SerdesSpec | str, ber: float) -> dict[str, Any]:
    """Closed-form error probabilities of a link's lanes at raw bit error rate ``ber``.

    Returns:
        dict: ``symbol_error_prob``, ``correctable_symbols`` (t),
        ``codeword_clean_prob``, ``codeword_corrected_prob`` (1..t symbol
        errors), ``codeword_uncorrectable_prob`` (more than t),
        ``codeword_flit_bits`` (flit bits per codeword, 5120 for KP4 with
        256b/257b), ``hazard_per_flit_bit`` (uncorrectable codewords per flit bit).

    Raises:
        ConfigError: ``ber`` outside [0, 1) or not a number; unknown preset.
    """
    serdes = link if isinstance(link, SerdesSpec) else _link(link).serdes
    if isinstance(ber, bool) or not isinstance(ber, (int, float)):
        raise ConfigError(f"ber = {ber!r}: expected a bit error rate in [0, 1)")
    return dict(_core.fec_error_model(serdes.to_dict(), float(ber)))


def packet_error_prob(link: LinkSpec | str, ber: float, payload_bytes: int = 256) -> float:
    """Probability that one packet carrying ``payload_bytes`` (header flits
    included in its wire bits) is corrupted at raw BER ``ber``: 1 - exp(-h W)."""
    lk = _link(link)
    m = fec_error_model(lk, ber)
    w = lk.packet.flits_per_packet(payload_bytes) * lk.packet.flit_bytes * 8
    return -math.expm1(-m["hazard_per_flit_bit"] * w)


def goodput_vs_ber(link: LinkSpec | str = "nvlink5", bers: float | Sequence[float] = (0.0, 1e-4, 5e-4, 1e-3, 1.5e-3, 2e-3, 2.5e-3),
                   *, total_bytes: int = 8 << 20, payload_bytes: int = 256, seed: int = 0,
                   **replay: Any) -> "pd.DataFrame":
    """Goodput of one saturated link direction against raw BER: simulated
    (the link lab with link-level retry, seeded) and the go-back-N closed form.

    Args:
        link: a :class:`LinkSpec` or link preset name.
        bers: raw (pre-FEC) bit error rates, each in [0, 1) (one float: one row).
        total_bytes: payload moved per point (more = less sampling noise).
        payload_bytes: payload per packet.
        seed: error-sampling seed (same seed, same result).
        replay: other :class:`ReplaySpec` fields (``nak_return_ps``,
            ``replay_buffer_bytes``, ``ack_interval_ps``, ...).

    Returns:
        DataFrame, one row per BER: ber, symbol_error_prob,
        codeword_corrected_prob, codeword_uncorrectable_prob,
        packet_error_prob, replays (sampled failed attempts), replay_ps,
        goodput_GBps (simulated, 1e9 B/s), goodput_ratio (to BER 0),
        closed_form_ratio ((1-P)/(1+(R/S-1)P)), closed_form_GBps
        (payload rate x packet efficiency x closed_form_ratio), p99_latency_ns.

    Raises:
        ConfigError: no BER, a BER outside [0, 1) or past the FEC cliff (over
            99 % of packets corrupted), bad replay fields, bad sizes.
    """
    import pandas as pd

    if isinstance(bers, (int, float)) and not isinstance(bers, bool):
        bers = [bers]  # one BER: a one-row table
    elif isinstance(bers, (str, bytes)) or not isinstance(bers, Iterable):
        raise ConfigError(f"bers = {bers!r}: a BER or a sequence of BERs, each in [0, 1)")
    bers = list(bers)
    if not bers:  # an empty table with no columns, silently, before
        raise ConfigError("bers = []: at least one BER in [0, 1)")
    lk = _link(link)
    base = lk.replay.to_dict() if lk.replay else {}
    clean = link_transfer(lk.replace(replay=ReplaySpec(**{**base, **replay, "ber": 0.0, "seed": seed})),  # type: ignore[arg-type]
                          total_bytes, payload_bytes, max_recorded_packets=0)
    flits = lk.packet.flits_per_packet(payload_bytes)
    rate = lk.payload_GBps() * lk.packet.efficiency(payload_bytes)
    rows = []
    for ber in bers:
        spec = lk.replace(replay=ReplaySpec(**{**base, **replay, "ber": ber, "seed": seed}))
        timing = spec.timing()  # type: ignore[attr-defined]
        rt = timing["replay"]
        m = fec_error_model(spec, ber)  # type: ignore[arg-type]
        p = -math.expm1(-m["hazard_per_flit_bit"] * flits * lk.packet.flit_bytes * 8)
        s = -(-flits * lk.packet.flit_bytes * 8 * 10**12 // timing["rate_bps"])
        r_ps = s + timing["latency_ps"] + rt["nak_return_ps"]
        eff = (1 - p) / (1 + (r_ps / s - 1) * p)
        r = link_transfer(spec, total_bytes, payload_bytes, max_recorded_packets=0)  # type: ignore[arg-type]
        rp: dict[str, int] = dict(r.link["replay"])  # type: ignore[call-overload]
        rows.append({
            "ber": float(ber), "symbol_error_prob": m["symbol_error_prob"],
            "codeword_corrected_prob": m["codeword_corrected_prob"],
            "codeword_uncorrectable_prob": m["codeword_uncorrectable_prob"],
            "packet_error_prob": p, "replays": int(rp["replays"]), "replay_ps": int(rp["replay_ps"]),
            "goodput_GBps": r.throughput_GBps, "goodput_ratio": r.throughput_GBps / clean.throughput_GBps,
            "closed_form_ratio": eff, "closed_form_GBps": rate * eff,
            "p99_latency_ns": r.latency_ps["p99"] / 1e3,
        })
    return pd.DataFrame(rows)
