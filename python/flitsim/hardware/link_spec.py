"""Link specs: SerDes lanes, FEC, line code, packet format, credits.

These mirror the Rust structs in ``rust/src/phy`` and ``rust/src/link``; the
Rust side is the single source of truth for validation and for the rate chain,
so every spec is checked by the engine as it is built.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from flitsim import _core
from flitsim._spec import Spec

Modulation = Literal["nrz", "pam4"]
LineCode = Literal["none", "64b/66b", "256b/257b", "128b/130b"]


class FecCode(Spec):
    """A Reed-Solomon-style block code: ``n`` symbols per codeword, ``k`` of data.

    Example: RS(544,514) "KP4", 10-bit symbols (Intel AN 846; IEEE 802.3 cl. 91).
    ``interleave_lanes`` is how many lanes one codeword is striped over (1 = a
    whole codeword on one lane); it sets the codeword accumulation latency.
    """

    n: int = Field(ge=1)
    k: int = Field(ge=1)
    symbol_bits: int = Field(ge=1, le=64)
    interleave_lanes: int = Field(default=1, ge=1)


KP4 = FecCode(n=544, k=514, symbol_bits=10)
"""RS(544,514), 10-bit symbols, t = 15 (Intel AN 846, 100GBASE-KP4)."""


class SerdesSpec(Spec):
    """One direction of a link's lanes.

    Fields: ``baud_gbd`` (symbol rate per lane, GBd), ``modulation`` (``"nrz"``
    1 bit/symbol, ``"pam4"`` 2), ``lanes`` per direction, optional ``fec``,
    ``line_code`` and a fixed ``phy_latency_ps``.

    Raises:
        ConfigError: on a non-positive rate, ``fec.k > fec.n``, and so on.
    """

    baud_gbd: float
    modulation: Modulation
    lanes: int
    fec: FecCode | None = None
    line_code: LineCode = "none"
    phy_latency_ps: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_in_engine(self) -> "SerdesSpec":
        _core.serdes_rates(self.to_dict())
        return self

    def rates(self) -> dict[str, Any]:
        """The rate chain (line, post-FEC and payload rates per lane and per
        direction in Gb/s; bit time and FEC accumulation latency in ps)."""
        return dict(_core.serdes_rates(self.to_dict()))


class PacketFormat(Spec):
    """Flits per packet: ``header_flits`` plus ceil(payload / ``flit_bytes``).

    Defaults follow NVLink 1/2 (Hot Chips 28; Pascal whitepaper): 16-byte flits,
    one header flit, up to 256 B payload. Later generations' formats are not
    public; the defaults are assumed to carry over.
    """

    flit_bytes: int = Field(default=16, ge=1)
    header_flits: int = Field(default=1, ge=0)
    max_payload_bytes: int = Field(default=256, ge=1)

    def flits_per_packet(self, payload_bytes: int) -> int:
        """Flits for one packet carrying ``payload_bytes``."""
        return self.header_flits + -(-payload_bytes // self.flit_bytes)

    def efficiency(self, payload_bytes: int) -> float:
        """Payload bytes / wire bytes for one packet (256 B -> 256/272 = 94.1 %)."""
        return payload_bytes / (self.flits_per_packet(payload_bytes) * self.flit_bytes)


class ReplaySpec(Spec):
    """Bit errors and link-level retry of a link direction (mirrors
    ``rust/src/link/replay.rs``).

    Each lane has a raw (pre-FEC) bit error rate ``ber`` in [0, 1); the FEC
    corrects codewords with up to t symbol errors (RS(544,514): t = 15) and a
    packet holding part of an uncorrectable codeword fails its CRC; the
    receiver NAKs it and the sender goes back N (resends it and everything
    sent after it). Per failed attempt the link loses R = serialization +
    latency + ``nak_return_ps``. ACKs, coalesced by ``ack_interval_ps``, free
    the ``replay_buffer_bytes`` replay buffer (0 = unbounded); a sender that
    hears nothing for ``timeout_ps`` gives the link up (the fabric then replays
    the packet over another link). ``seed`` seeds the error sampling (each
    link direction draws its own stream).

    Defaults are assumed (NVLink's lane BER, replay timers and buffers are not
    public): ``nak_return_ps``/``ack_return_ps`` None = link latency + one flit
    time (one control flit on the reverse direction), ``timeout_ps`` 1 us.

    Raises:
        ConfigError: ``ber`` outside [0, 1) or so high that more than 99 % of
            maximum-size packets would be corrupted; delays above one second;
            a replay buffer smaller than one maximum-size packet.
    """

    ber: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False)
    nak_return_ps: int | None = Field(default=None, ge=0)
    ack_interval_ps: int = Field(default=0, ge=0)
    ack_return_ps: int | None = Field(default=None, ge=0)
    replay_buffer_bytes: int = Field(default=0, ge=0)
    timeout_ps: int = Field(default=1_000_000, ge=1)
    seed: int = Field(default=0, ge=0, lt=1 << 64)


class LinkSpec(Spec):
    """One direction of a link (both directions identical).

    Fields: ``serdes``, ``packet``, ``propagation_ps`` (channel flight time),
    ``vcs`` (virtual channels), ``credits_per_vc_flits`` (receiver buffer per VC,
    in flits; must hold one maximum-size packet), ``credit_return_ps`` (receiver
    frees a buffer -> credit usable at the sender), ``replay`` (bit errors and
    link-level retry, :class:`ReplaySpec`; None = error-free).

    Raises:
        ConfigError: on any invalid field, including credits smaller than one
            maximum-size packet.
    """

    serdes: SerdesSpec
    packet: PacketFormat = PacketFormat()
    propagation_ps: int = Field(default=0, ge=0)
    vcs: int = Field(default=1, ge=1)
    credits_per_vc_flits: int = Field(ge=1)
    credit_return_ps: int = Field(default=0, ge=0)
    #: Bit errors and link-level retry; None = an error-free link.
    replay: ReplaySpec | None = None

    @model_validator(mode="after")
    def _check_in_engine(self) -> "LinkSpec":
        _core.link_timing(self.to_dict())
        return self

    def timing(self) -> dict[str, Any]:
        """Integer timing the engine uses: ``rate_bps``, ``flit_ps``,
        ``latency_ps`` (propagation + PHY + FEC accumulation), credits."""
        return dict(_core.link_timing(self.to_dict())["timing"])

    def rates(self) -> dict[str, Any]:
        """The SerDes rate chain of this link (see :meth:`SerdesSpec.rates`)."""
        return self.serdes.rates()

    def payload_GBps(self) -> float:
        """Payload rate of one direction before packet headers, GB/s (1e9 B/s)."""
        return float(self.rates()["payload_rate_gbps"]) / 8.0
