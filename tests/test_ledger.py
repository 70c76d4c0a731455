"""Bandwidth ledger figures against NVIDIA's published NVLink numbers."""

import pytest

import flitsim


def test_nvl72_ledger_published_figures():
    led = flitsim.ledger("gb200-nvl72")
    # NVLink product page: 50 GB/s per link per direction, 1.8 TB/s per GPU, 130 TB/s (129.6) per rack.
    assert led.row("link", "payload").per_direction_GBps == pytest.approx(50.0)
    assert led.row("gpu", "payload").bidirectional_GBps == pytest.approx(1800.0)
    assert led.row("system", "payload").bidirectional_GBps == pytest.approx(129_600.0)
    # 212.5 Gb/s line rate per lane (inferred), 200 Gb/s payload (Blackwell whitepaper).
    assert led.row("lane", "line").per_direction_gbps == pytest.approx(212.5)
    assert led.row("lane", "payload").per_direction_gbps == pytest.approx(200.0)
    # After packet headers: 256 B -> 17 flits, 128 B -> 9 flits (16 B flits, 1 header flit).
    assert led.row("link", "effective @ 256 B").per_direction_GBps == pytest.approx(50 * 256 / 272)
    assert led.row("link", "effective @ 128 B").per_direction_GBps == pytest.approx(50 * 128 / 144)
    # One switch chip: 72 ports x 50 GB/s x 2 = 7.2 TB/s; a tray of 2 chips = 14.4 TB/s (product page).
    assert 2 * led.row("switch", "payload").bidirectional_GBps == pytest.approx(14_400.0)


def test_h100_ledger():
    led = flitsim.ledger("hgx-h100")
    # 18 links x 25 GB/s = 450 GB/s per direction, 900 GB/s bidirectional (NVIDIA SGX H100 docs).
    assert led.row("gpu", "payload").per_direction_GBps == pytest.approx(450.0)
    assert led.row("gpu", "payload").bidirectional_GBps == pytest.approx(900.0)


def test_a100_ledger():
    # 12 links x 25 GB/s = 300 GB/s per direction, 600 GB/s bidirectional.
    assert flitsim.ledger("dgx-a100").row("gpu", "payload").bidirectional_GBps == pytest.approx(600.0)


def test_ledger_dataframe_and_dict():
    led = flitsim.ledger("nvlink5", payloads_bytes=(64,))
    df = led.to_pandas()
    assert {"scope", "stage", "per_direction_gbps", "per_direction_GBps", "bidirectional_GBps"} <= set(df.columns)
    row = df[(df.scope == "link") & (df.stage == "effective @ 64 B")].iloc[0]
    assert row.per_direction_GBps == pytest.approx(50 * 0.8)  # 64 B in 5 flits = 80 % (Hot Chips 28)
    assert led.to_dict()["rows"][0]["scope"] == "lane"


@pytest.mark.parametrize("bad", ["nvl-9000", 42, None])
def test_ledger_rejects_unknown_preset(bad):
    with pytest.raises(flitsim.ConfigError, match="preset"):
        flitsim.ledger(bad)


def test_ledger_rejects_payload_above_max():
    with pytest.raises(flitsim.ConfigError, match="payloads_bytes"):
        flitsim.ledger("nvlink5", payloads_bytes=(512,))
