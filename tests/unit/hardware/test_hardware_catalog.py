"""The chip and link catalog: every entry loads and names its sources; names, aliases, chip files, bad input.

Published figures pinned here (exact, tolerance 0: they are copied from the cited tables):
- Patterson et al. 2021, "Carbon Emissions and Large Neural Network Training", Tables 3-4: TPU v2 46 TFLOP/s
  and 280 W TDP, TPU v3 123 TFLOP/s and 450 W, V100 125 TFLOP/s and 300 W.
- NVIDIA datasheets (A100 2021, H100 2023): dense = half the printed with-sparsity figure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.hardware import catalog
from greentrain.hardware.catalog import chips, get_chip, get_link, links
from greentrain.hardware.chip import Chip, Link

CANONICAL = ("v100-32gb", "t4", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x",
             "rtx-3090", "rtx-4090", "rtx-5090", "tpu-v2", "tpu-v3", "tpu-v4")
TFLOP = 1e12


def test_every_canonical_chip_is_in_the_catalog() -> None:
    table = chips()
    assert set(CANONICAL) <= set(table)
    assert all(isinstance(c, Chip) and c.name == n for n, c in table.items())


def test_every_link_loads_and_every_chip_link_exists() -> None:
    assert all(isinstance(link, Link) and link.name == n for n, link in links().items())
    for chip in chips().values():
        for name in (chip.intra_node_link, chip.inter_node_link, chip.host_link):
            if name:
                assert get_link(name).name == name


@pytest.mark.parametrize("name", sorted(catalog.chips()))
def test_every_chip_names_the_source_of_each_figure(name: str) -> None:
    chip = get_chip(name)
    src = chip.source.lower()
    assert "datasheet" in src or "whitepaper" in src or "data sheet" in src or "tpu v" in src
    assert chip.tdp_w > 0 and 0 < chip.idle_w <= chip.tdp_w
    assert "idle_w" in src  # either the measured minimum or the stated 10 %-of-TDP assumption
    if chip.embodied_kg_co2e > 0:
        assert "embodied" in src and "luccioni" in src
    assert "price" in src  # the instance, region and date, or why there is none
    if chip.price_usd_per_s > 0:
        assert "on-demand" in src and ("us-" in src)


@pytest.mark.parametrize("name", sorted(catalog.links()))
def test_every_link_names_its_bandwidth_and_latency_source(name: str) -> None:
    link = get_link(name)
    assert link.source and "latency" in link.source.lower()
    assert link.bytes_per_s > 0 and link.latency_s > 0


def test_patterson_2021_table_4_figures() -> None:
    # Patterson et al. 2021, Table 4 (Processor, TDP) and Table 3 (peak TFLOPS).
    assert get_chip("tpu-v2").peak_flop_per_s("bf16") == 46 * TFLOP and get_chip("tpu-v2").tdp_w == 280
    assert get_chip("tpu-v3").peak_flop_per_s("bf16") == 123 * TFLOP and get_chip("tpu-v3").tdp_w == 450
    v100 = get_chip("v100-32gb")
    assert v100.peak_flop_per_s("fp16") == 125 * TFLOP and v100.tdp_w == 300


def test_dense_peaks_are_half_the_sparsity_figures() -> None:
    # H100 SXM datasheet: 1,979 BF16 and 3,958 FP8 TFLOP/s "with sparsity"; A100: 624 BF16 with sparsity.
    h100 = get_chip("h100-sxm")
    assert h100.peak_bf16_flop_per_s == 1979 / 2 * TFLOP and h100.peak_fp8_flop_per_s == 3958 / 2 * TFLOP
    assert get_chip("a100-80gb").peak_bf16_flop_per_s == 624 / 2 * TFLOP
    # Same compute die: the H200 differs from the H100 SXM in memory only.
    h200 = get_chip("h200")
    assert h200.peak_bf16_flop_per_s == h100.peak_bf16_flop_per_s
    assert h200.memory_bytes > h100.memory_bytes and h200.memory_bytes_per_s > h100.memory_bytes_per_s


def test_precision_fallbacks_and_unsupported_precisions() -> None:
    v100 = get_chip("v100-32gb")  # no bf16 or tf32 units: same-width fallbacks
    assert v100.peak_flop_per_s("bf16") == v100.peak_fp16_flop_per_s
    assert v100.peak_flop_per_s("tf32") == v100.peak_fp32_flop_per_s
    with pytest.raises(ConfigError, match="no fp8 peak"):
        get_chip("a100-80gb").peak_flop_per_s("fp8")
    with pytest.raises(ConfigError, match="must be one of"):
        get_chip("a100-80gb").peak_flop_per_s("int4")


def test_link_generations_are_ordered() -> None:
    bw = {n: get_link(n).bytes_per_s for n in links()}
    assert bw["nvlink2"] < bw["nvlink3"] < bw["nvlink4"] < bw["nvlink5"]
    assert bw["pcie5"] == pytest.approx(2 * bw["pcie4"]) == pytest.approx(4 * bw["pcie3"])
    assert bw["ib-edr-100"] * 8 == bw["ib-hdr-200"] * 4 == bw["ib-ndr-400"] * 2 == bw["ib-xdr-800"]
    assert bw["ib-ndr-400"] == 50e9  # 400 Gb/s = 50 GB/s per direction


@pytest.mark.parametrize("given, canonical", [
    ("H100-SXM", "h100-sxm"), ("  a100-80GB ", "a100-80gb"), ("A100_40GB", "a100-40gb"), ("H100", "h100-sxm"),
    ("RTX4090", "rtx-4090"), ("TPU_V4", "tpu-v4"), ("A100", "a100-80gb"), ("Instinct-MI300X", "mi300x"),
])
def test_names_are_case_insensitive_and_aliases_resolve(given: str, canonical: str) -> None:
    assert get_chip(given).name == canonical


def test_unknown_chip_says_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown chip; did you mean h100-sxm") as e:
        get_chip("h100-sxn")
    assert e.value.field == "chip" and e.value.value == "h100-sxn"
    with pytest.raises(ConfigError, match="unknown link; did you mean"):
        get_link("nvlink6")


def test_no_alias_names_two_chips(monkeypatch: pytest.MonkeyPatch, clear_alias_cache: None) -> None:
    assert catalog._aliases()  # the real catalog is consistent
    a = get_chip("a100-80gb")
    clash = {n: replace(a, name=n, aliases=("a",)) for n in ("x1", "x2")} | {"a100-80gb": a}
    monkeypatch.setattr(catalog, "chips", lambda: clash)
    catalog._aliases.cache_clear()
    with pytest.raises(ConfigError, match="already names another chip"):
        catalog._aliases()


@pytest.fixture
def clear_alias_cache() -> Iterator[None]:
    yield
    catalog._aliases.cache_clear()


CHIP_FILE = """\
name: my-accelerator
vendor: acme
memory_gb: 96
memory_bandwidth_gb_per_s: 2765
bf16_tflop_per_s: 459
tdp_w: 500
idle_w: 100
price_usd_per_hour: 4.2
intra_node_link: nvlink4
sources: ["made up for a test"]
"""


def test_a_chip_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "acc.yaml"
    path.write_text(CHIP_FILE)
    chip = get_chip(str(path))
    assert chip.name == "my-accelerator"
    assert chip.memory_bytes == 96e9  # memory_gb: decimal
    assert chip.peak_flop_per_s("fp16") == 459 * TFLOP
    assert chip.price_usd_per_s == pytest.approx(4.2 / 3600)


def test_a_chip_file_rejects_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "acc.yaml"
    path.write_text(CHIP_FILE.replace("tdp_w: 500", "tdp_watts: 500"))
    rule = r"chip\(my-accelerator\)\.tdp_watts.*unknown key; did you mean tdp_w"
    with pytest.raises(ConfigError, match=rule):
        get_chip(str(path))


@pytest.mark.parametrize("edit, field", [
    (("idle_w: 100", "idle_w: 900"), "idle_w"),  # idle above TDP
    (("tdp_w: 500", "tdp_w: -5"), "tdp_w"),
    (("memory_gb: 96", "memory_gb: lots"), "memory_gb"),
    (("memory_gb: 96\n", ""), "memory_gib"),  # no memory at all
    (("bf16_tflop_per_s: 459", "fp32_tflop_per_s: 50"), "peak_bf16_flop_per_s"),  # no 16-bit peak
])
def test_a_bad_chip_file_gives_one_config_error(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    path = tmp_path / "acc.yaml"
    path.write_text(CHIP_FILE.replace(*edit))
    with pytest.raises(ConfigError) as e:
        get_chip(str(path))
    assert field in e.value.field and "\n" not in str(e.value)


def test_a_missing_or_malformed_chip_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file does not exist"):
        get_chip(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("memory_gb: [96\n")
    with pytest.raises(ConfigError, match="malformed YAML"):
        get_chip(str(bad))
