"""Bad input raises ConfigError naming the field, the value and what is allowed;
nothing panics across the Python boundary."""

import pytest

import flitsim
from flitsim import _core
from flitsim.hardware import FecCode, LinkSpec, SerdesSpec, nvlink5


def good_serdes(**kw):
    d = dict(baud_gbd=106.25, modulation="pam4", lanes=2)
    d.update(kw)
    return d


@pytest.mark.parametrize("baud", [0, -1.0, float("nan"), float("inf")])
def test_zero_negative_or_nonfinite_rate(baud):
    with pytest.raises(flitsim.ConfigError, match="baud_gbd"):
        SerdesSpec(**good_serdes(baud_gbd=baud))


def test_fec_k_greater_than_n_names_field_and_values():
    with pytest.raises(flitsim.ConfigError) as e:
        SerdesSpec(**good_serdes(fec=FecCode(n=514, k=544, symbol_bits=10)))
    msg = str(e.value)
    assert "fec.k" in msg and "544" in msg and "514" in msg


def test_credits_smaller_than_one_packet():
    with pytest.raises(flitsim.ConfigError, match="credits_per_vc_flits") as e:
        nvlink5().replace(credits_per_vc_flits=16)
    assert "17" in str(e.value)  # one 256 B packet = 17 flits


def test_credits_smaller_than_packet_in_link_lab():
    with pytest.raises(flitsim.ConfigError, match="credits_per_vc_flits"):
        flitsim.link_transfer("nvlink5", 4096, 256, credits_per_vc_flits=3)


@pytest.mark.parametrize("name", ["nvlink9", "", "NVLink 5 please"])
def test_unknown_link_preset(name):
    with pytest.raises(flitsim.ConfigError, match="preset"):
        flitsim.link_preset(name)


def test_unknown_system_preset():
    with pytest.raises(flitsim.ConfigError, match="expected one of"):
        flitsim.system_preset("dgx-z9000")


@pytest.mark.parametrize("kw,field", [
    (dict(lanes="two"), "lanes"),
    (dict(modulation="pam16"), "modulation"),
    (dict(lanes=0), "lanes"),
    (dict(line_code="8b/10b"), "line_code"),
    (dict(bogus=1), "bogus"),
])
def test_wrong_types_and_values(kw, field):
    with pytest.raises(flitsim.ConfigError, match=field):
        SerdesSpec(**good_serdes(**kw))


@pytest.mark.parametrize("kw,field", [
    (dict(total_bytes=0), "total_bytes"),
    (dict(total_bytes=-5), "total_bytes"),
    (dict(total_bytes="1G"), "total_bytes"),
    (dict(payload_bytes=0), "payload_bytes"),
    (dict(payload_bytes=300), "payload_bytes"),
])
def test_link_lab_bad_sizes(kw, field):
    args = dict(total_bytes=4096, payload_bytes=256)
    args.update(kw)
    with pytest.raises(flitsim.ConfigError, match=field):
        flitsim.link_transfer("nvlink5", args["total_bytes"], args["payload_bytes"])


@pytest.mark.parametrize("spec", [
    None, 5, "x", [], {"serdes": 1}, {"baud_gbd": -1, "modulation": "nrz", "lanes": 1},
    {"baud_gbd": 1e300, "modulation": "nrz", "lanes": 64},
    {"baud_gbd": 1, "modulation": "nrz", "lanes": 2**40},
])
def test_raw_core_calls_never_panic(spec):
    # Straight into the extension, bypassing pydantic: still a ConfigError.
    with pytest.raises(flitsim.ConfigError):
        _core.serdes_rates(spec)
    with pytest.raises(flitsim.ConfigError):
        _core.link_transfer({"link": spec, "total_bytes": 1, "payload_bytes": 1})


def test_config_error_is_a_value_error():
    assert issubclass(flitsim.ConfigError, ValueError)
    assert issubclass(flitsim.StalledError, RuntimeError)


def test_spec_round_trips_through_dict():
    link = nvlink5()
    assert LinkSpec.from_dict(link.to_dict()) == link
    with pytest.raises(flitsim.ConfigError):
        LinkSpec.from_dict(["not", "a", "dict"])
