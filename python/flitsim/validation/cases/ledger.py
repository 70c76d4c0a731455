"""Bandwidth ledger figures against NVIDIA's published NVLink numbers: the
rate chain from lane parameters to payload must give the datasheet values
exactly (closed forms, no measurement)."""

from __future__ import annotations

from typing import Any

from flitsim.validation.case import Case

EXACT = "exact arithmetic of the rate chain (float rounding only)"


def _row(preset: str, scope: str, stage: str, attr: str, scale: float = 1.0) -> Any:
    def compute(ctx: Any) -> float:
        from flitsim.ledger import ledger

        return float(getattr(ledger(preset).row(scope, stage), attr)) * scale
    return compute


def _case(cid: str, quantity: str, unit: str, source: str, measured: float, preset: str, scope: str,
          stage: str, attr: str, system: str, scale: float = 1.0) -> Case:
    what = {"per_direction_GBps": "per_direction_GBps", "bidirectional_GBps": "bidirectional_GBps",
            "per_direction_gbps": "per_direction_gbps"}[attr]
    call = f'flitsim.ledger("{preset}").row("{scope}", "{stage}").{what}' + (f" * {scale:g}" if scale != 1 else "")
    return Case(id=f"ledger.{cid}", area="ledger", quantity=quantity, unit=unit, source=source, measured=measured,
                tolerance=0.0, tolerance_why=EXACT, call=call, compute=_row(preset, scope, stage, attr, scale),
                tag="theory", system=system, fast=True)


def _raw_link(ctx: Any) -> float:
    from flitsim.hardware import nvlink4

    return float(nvlink4().rates()["line_rate_gbps"]) / 8


CASES = [
    _case("nvl72_link_payload", "NVLink 5 payload per link per direction", "GB/s",
          "NVIDIA NVLink product page; Blackwell architecture whitepaper (18 links x 50 GB/s per direction)",
          50.0, "gb200-nvl72", "link", "payload", "per_direction_GBps", "GB200 NVL72"),
    _case("nvl72_gpu_payload", "NVLink 5 payload per GPU, both directions", "GB/s",
          "NVIDIA NVLink product page (1.8 TB/s per GPU)", 1800.0, "gb200-nvl72", "gpu", "payload",
          "bidirectional_GBps", "GB200 NVL72"),
    _case("nvl72_rack_payload", "NVL72 rack payload, both directions", "GB/s",
          "NVIDIA NVLink product page (130 TB/s = 72 x 1.8 TB/s = 129.6 TB/s)", 129_600.0, "gb200-nvl72",
          "system", "payload", "bidirectional_GBps", "GB200 NVL72"),
    _case("nvl72_lane_payload", "NVLink 5 payload per lane", "Gb/s",
          "Blackwell architecture whitepaper; Hot Chips 2025 NVLink spine reports (200 Gb/s per lane)", 200.0,
          "gb200-nvl72", "lane", "payload", "per_direction_gbps", "GB200 NVL72"),
    _case("nvl72_lane_line", "NVLink 5 line rate per lane (200 Gb/s x 1.0625 KP4 chain)", "Gb/s",
          "IEEE 802.3dj 200G lane (212.5 Gb/s, 106.25 GBd PAM4); Intel AN 846 rate chain (x 34/33 ... 1.0625)",
          212.5, "gb200-nvl72", "lane", "line", "per_direction_gbps", "GB200 NVL72"),
    _case("nvl72_link_eff256", "NVLink 5 effective rate at 256 B payload (17 flits)", "GB/s",
          "Hot Chips 28 NVLink talk / Pascal whitepaper packet format: 256 B in 17 x 16 B flits (50 x 256/272)",
          50 * 256 / 272, "gb200-nvl72", "link", "effective @ 256 B", "per_direction_GBps", "GB200 NVL72"),
    _case("nvl72_link_eff128", "NVLink 5 effective rate at 128 B payload (9 flits)", "GB/s",
          "Hot Chips 28 NVLink talk packet format: 128 B in 9 x 16 B flits (50 x 128/144)",
          50 * 128 / 144, "gb200-nvl72", "link", "effective @ 128 B", "per_direction_GBps", "GB200 NVL72"),
    _case("nvl72_switch_tray", "NVLink switch tray (2 chips), both directions", "GB/s",
          "NVIDIA NVLink product page (144 ports, 14.4 TB/s per switch tray)", 14_400.0, "gb200-nvl72", "switch",
          "payload", "bidirectional_GBps", "GB200 NVL72", scale=2.0),
    _case("h100_gpu_payload_dir", "NVLink 4 payload per GPU per direction", "GB/s",
          "NVIDIA SGX H100 docs; Hopper in-depth blog (18 x 25 GB/s = 450 GB/s per direction)", 450.0,
          "hgx-h100", "gpu", "payload", "per_direction_GBps", "H100"),
    _case("h100_gpu_payload_bidir", "NVLink 4 payload per GPU, both directions", "GB/s",
          "NVIDIA H100 datasheet; Hopper in-depth blog (900 GB/s)", 900.0, "hgx-h100", "gpu", "payload",
          "bidirectional_GBps", "H100"),
    _case("a100_gpu_payload_bidir", "NVLink 3 payload per GPU, both directions", "GB/s",
          "Ampere whitepaper; nccl-tests issue 149 (12 links x 25 GB/s per direction, 600 GB/s)", 600.0,
          "dgx-a100", "gpu", "payload", "bidirectional_GBps", "A100"),
    Case(id="ledger.h100_link_raw", area="ledger", quantity="NVLink 4 raw rate per link (2 lanes x 106.25 Gb/s)",
         unit="GB/s", source='NVIDIA SGX H100 docs ("Each NVLink4 port consists of 2 lanes ... raw BW of 26.5625GB/s")',
         measured=26.5625, tolerance=0.0, tolerance_why=EXACT,
         call='flitsim.hardware.nvlink4().rates()["line_rate_gbps"] / 8', compute=_raw_link, tag="theory",
         system="H100", fast=True),
]
