"""Schema test of the bundled GPU catalog, name matching, and loading a user's edited copy."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from gpuplace.catalog import CATALOG_VERSION, GpuCatalog, load_gpu_catalog
from gpuplace.catalog.gpus import DATA_DIR, FORM_FACTORS, GPU_CATALOG_ENV, GPU_COLUMNS, MIG_COLUMNS
from gpuplace.errors import InvalidInput, UnknownName

GPUS_CSV = DATA_DIR / "gpus.csv"
MIG_CSV = DATA_DIR / "mig_profiles.csv"

REQUIRED_GPUS: tuple[str, ...] = (
    "V100-SXM2-16GB",
    "V100-SXM2-32GB",
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "A100-PCIE-40GB",
    "A100-PCIE-80GB",
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H100-NVL-94GB",
    "H200-SXM-141GB",
    "L4-24GB",
    "L40S-48GB",
    "A10-24GB",
    "T4-16GB",
    "RTX-3090-24GB",
)


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return load_gpu_catalog()


@pytest.fixture(autouse=True)
def _no_user_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own GPUPLACE_GPU_CATALOG must not change what these tests read.
    monkeypatch.delenv(GPU_CATALOG_ENV, raising=False)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns if columns is not None else list(rows[0])
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- the bundled catalog ------------------------------------------------------------------------


def test_bundled_catalog_has_every_required_gpu(catalog: GpuCatalog) -> None:
    missing = sorted(set(REQUIRED_GPUS) - set(catalog.names()))
    assert not missing
    assert len(catalog) == len(list(catalog)) >= len(REQUIRED_GPUS)
    assert catalog.source == str(GPUS_CSV)


def test_bundled_csv_columns_are_the_schema() -> None:
    with GPUS_CSV.open(newline="") as f:
        assert tuple(next(csv.reader(f))) == GPU_COLUMNS
    with MIG_CSV.open(newline="") as f:
        assert tuple(next(csv.reader(f))) == MIG_COLUMNS


def test_catalog_version_matches_catalog_yaml(catalog: GpuCatalog) -> None:
    meta = yaml.safe_load((DATA_DIR / "catalog.yaml").read_text())

    assert catalog.version == CATALOG_VERSION == str(meta["version"])
    assert meta["gpus"] == "gpus.csv"
    assert meta["mig_profiles"] == "mig_profiles.csv"


def test_figures_that_must_be_positive_are(catalog: GpuCatalog) -> None:
    for gpu in catalog:
        assert gpu.memory_gib > 0, gpu.name
        assert gpu.hbm_bandwidth_gbps > 0, gpu.name
        assert gpu.fp16_tflops > 0, gpu.name
        assert gpu.price_usd_per_hour > 0, gpu.name
        assert gpu.pcie_gen >= 3, gpu.name
        assert gpu.pcie_lanes > 0, gpu.name
        assert gpu.bf16_tflops >= 0, gpu.name
        assert gpu.nvlink_gbps >= 0, gpu.name
        assert gpu.form_factor in FORM_FACTORS, gpu.name
        assert gpu.compute_capability.count(".") == 1, gpu.name


def test_bf16_is_zero_exactly_on_volta_and_turing(catalog: GpuCatalog) -> None:
    for gpu in catalog:
        if gpu.architecture in ("volta", "turing"):
            assert gpu.bf16_tflops == 0, gpu.name
            assert gpu.peak_tflops("bfloat16") == 0, gpu.name
        else:
            assert gpu.bf16_tflops > 0, gpu.name
    assert catalog.get("T4-16GB").bf16_tflops == 0
    assert catalog.get("V100-SXM2-32GB").bf16_tflops == 0


def test_every_row_cites_its_spec_and_price_sources() -> None:
    for row in _rows(GPUS_CSV):
        assert row["spec_source"].strip(), row["name"]
        assert row["price_source"].strip(), row["name"]


def test_mig_profiles_fit_their_gpu(catalog: GpuCatalog) -> None:
    for gpu in catalog:
        if gpu.compute_slices == 0:
            assert not gpu.mig_capable, gpu.name
            assert gpu.mig_profiles == (), gpu.name
            continue
        assert gpu.mig_capable, gpu.name
        assert gpu.memory_slices > 0, gpu.name
        for p in gpu.mig_profiles:
            where = f"{gpu.name} {p.name}"
            assert 0 < p.compute_slices <= gpu.compute_slices, where
            assert 0 < p.memory_slices <= gpu.memory_slices, where
            assert p.max_instances >= 1, where
            assert p.max_instances * p.compute_slices <= 7, where
            assert 0 < p.memory_gib < gpu.memory_gib, where
            # the name's "<g>g" is the compute slice count
            assert p.name.startswith(f"{p.compute_slices}g."), where


def test_mig_capable_gpus_are_the_datacenter_amperes_hoppers_and_blackwells(catalog: GpuCatalog) -> None:
    mig = {g.name for g in catalog if g.mig_capable}

    assert mig == {
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A100-PCIE-40GB",
        "A100-PCIE-80GB",
        "H100-SXM5-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H200-SXM-141GB",
        "B200-SXM-180GB",
        "B300-SXM-288GB",
        "GB200-NVL72-186GB",
        "RTX-PRO-6000-BW-96GB",
    }
    assert {p.name for p in catalog.get("A100-SXM4-80GB").mig_profiles} >= {"1g.10gb", "3g.40gb", "7g.80gb"}
    # the RTX PRO 6000 splits into 4 slices, not 7
    assert {p.name: p.max_instances for p in catalog.get("RTX-PRO-6000-BW-96GB").mig_profiles} == {
        "1g.24gb": 4,
        "2g.48gb": 2,
        "4g.96gb": 1,
    }


@pytest.mark.parametrize(
    ("name", "memory_gib", "bandwidth", "bf16", "fp8", "domain"),
    [
        ("B200", 179.1, 7700, 2250, 4500, 8),
        ("B300", 268.0, 7700, 2250, 4500, 8),
        ("GB200", 185.0, 8000, 2500, 5000, 72),
        ("RTX PRO 6000 Blackwell", 95.6, 1597, 468, 936, 1),
    ],
)
def test_blackwell_gpus_carry_their_datasheet_figures(
    catalog: GpuCatalog, name: str, memory_gib: float, bandwidth: float, bf16: float, fp8: float, domain: int
) -> None:
    gpu = catalog.get(name)

    assert gpu.architecture == "blackwell"
    assert (gpu.memory_gib, gpu.hbm_bandwidth_gbps, gpu.bf16_tflops, gpu.fp8_tflops) == (
        memory_gib,
        bandwidth,
        bf16,
        fp8,
    )
    assert gpu.nvlink_domain == domain
    assert gpu.mig_capable and gpu.price_usd_per_hour > 0


def test_fp8_tensor_cores_exactly_on_ada_hopper_and_blackwell(catalog: GpuCatalog) -> None:
    for gpu in catalog:
        if gpu.architecture in ("ada", "hopper", "blackwell"):
            assert gpu.fp8_tflops >= 2 * gpu.bf16_tflops * 0.99, gpu.name  # FP8 is twice the bf16 rate
            assert gpu.peak_tflops("fp8") == gpu.fp8_tflops
        else:
            assert gpu.fp8_tflops == 0, gpu.name


def test_nvlink_domain_is_catalog_data_with_a_derived_default(catalog: GpuCatalog, tmp_path: Path) -> None:
    assert catalog.get("GB200").nvlink_domain == 72  # one NVLink domain across the rack's nodes
    assert catalog.get("H100-SXM5-80GB").nvlink_domain == 8
    assert catalog.get("A100-PCIE-80GB").nvlink_domain == 2  # bridged pairs
    assert catalog.get("L4").nvlink_domain == 1
    # a user's catalog from before the column existed: derived from the form factor, no FP8
    columns = [c for c in GPU_COLUMNS if c not in ("fp8_tflops", "nvlink_domain_gpus")]
    rows = [{c: r[c] for c in columns} for r in _rows(GPUS_CSV)]
    old = load_gpu_catalog(_write(tmp_path / "gpus.csv", rows, columns))
    assert old.get("H100-SXM5-80GB").nvlink_domain == 8
    assert old.get("GB200").nvlink_domain == 8  # the rack's domain is only known from the column
    assert old.get("H100-SXM5-80GB").fp8_tflops == 0


def test_every_mig_row_names_a_gpu_in_the_catalog(catalog: GpuCatalog) -> None:
    assert {row["gpu"] for row in _rows(MIG_CSV)} <= set(catalog.names())


# --- lookup and device matching -----------------------------------------------------------------


def test_get_by_name_and_by_alias_in_any_spelling(catalog: GpuCatalog) -> None:
    assert catalog.get("H100-SXM5-80GB").name == "H100-SXM5-80GB"
    assert catalog.get("h100 sxm5 80gb").name == "H100-SXM5-80GB"
    assert catalog.get("A100-80GB").name == "A100-SXM4-80GB"
    assert catalog.get("  nvidia_l4 ").name == "L4-24GB"


def test_get_misspelt_name_suggests_the_right_one(catalog: GpuCatalog) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.get("H100-SXM5-80G")

    err = info.value
    assert isinstance(err, InvalidInput)
    assert err.field == "gpu"
    assert err.suggestions[0] == "H100-SXM5-80GB"
    assert "Did you mean 'H100-SXM5-80GB'" in str(err)
    assert str(err).startswith("gpu='H100-SXM5-80G': unknown name")


def test_get_reports_the_callers_field(catalog: GpuCatalog) -> None:
    with pytest.raises(UnknownName, match=r"^allowed_gpus='L40': unknown name\. Did you mean 'L40S-48GB'"):
        catalog.get("L40", field="allowed_gpus")


@pytest.mark.parametrize(
    ("given", "variants"),
    [
        ("A100", ["A100-PCIE-40GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-SXM4-80GB"]),
        ("a100-80", ["A100-PCIE-80GB", "A100-SXM4-80GB"]),
        ("H100", ["H100-NVL-94GB", "H100-PCIE-80GB", "H100-SXM5-80GB"]),
        ("A10G", ["A10-24GB"]),  # no name begins so: the closest spelling
    ],
)
def test_an_abbreviated_name_suggests_the_variants_it_begins(
    catalog: GpuCatalog, given: str, variants: list[str]
) -> None:
    """issue 33: `--gpu A100` suggested only A10-24GB, the name closest by letters, not the A100s."""
    with pytest.raises(UnknownName) as info:
        catalog.get(given)
    assert list(info.value.suggestions) == variants
    assert f"Did you mean {' or '.join(repr(v) for v in variants)}?" in str(info.value)


def test_find_returns_none_for_unknown(catalog: GpuCatalog) -> None:
    assert catalog.find("B100") is None


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),  # torch / nvidia-smi on an SXM5 H100
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"),  # GPU Feature Discovery label
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
        ("NVIDIA H200", "H200-SXM-141GB"),
        ("Tesla T4", "T4-16GB"),
        ("NVIDIA-L4", "L4-24GB"),
        ("NVIDIA L40S", "L40S-48GB"),
        ("NVIDIA GeForce RTX 3090", "RTX-3090-24GB"),
        ("NVIDIA H100 NVL", "H100-NVL-94GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("NVIDIA B200", "B200-SXM-180GB"),
        ("NVIDIA-B200", "B200-SXM-180GB"),
        ("NVIDIA GB200", "GB200-NVL72-186GB"),  # not B200: aliases match whole words only
        ("NVIDIA B300 SXM6 AC", "B300-SXM-288GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-BW-96GB"),
    ],
)
def test_match_device_maps_reported_names(catalog: GpuCatalog, reported: str, expected: str) -> None:
    spec = catalog.match_device(reported)

    assert spec is not None
    assert spec.name == expected


def test_match_device_finds_the_longest_alias_inside_a_longer_name(catalog: GpuCatalog) -> None:
    # No alias equals this name, but "Tesla V100-SXM2-32GB" is a whole-word part of it.
    spec = catalog.match_device("Tesla V100-SXM2-32GB-LS", memory_gib=31.7)

    assert spec is not None
    assert spec.name == "V100-SXM2-32GB"


def test_match_device_memory_rules_out_a_variant_of_other_size(catalog: GpuCatalog) -> None:
    assert catalog.match_device("Tesla V100-SXM2-32GB-LS", memory_gib=15.8) is None


@pytest.mark.parametrize("reported", ["NVIDIA B100", "NVIDIA A10G", "NVIDIA L40", "AMD Instinct MI300X", ""])
def test_match_device_returns_none_for_an_unknown_gpu(catalog: GpuCatalog, reported: str) -> None:
    # A10G and L40 are near misses: "A10" and "L4" must match whole words only.
    assert catalog.match_device(reported) is None


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("NVIDIA H200 NVL", None),  # no H200 NVL entry: not the SXM part "NVIDIA H200" names
        ("NVIDIA-H200-NVL", None),  # its GPU Feature Discovery label
        ("NVIDIA H200 PCIe", None),
        ("NVIDIA H100 NVL", "H100-NVL-94GB"),
        ("NVIDIA H100 PCIe", "H100-PCIE-80GB"),
        ("NVIDIA H100 PCIe 80GB", "H100-PCIE-80GB"),
        ("NVIDIA H100 SXM5 80GB", "H100-SXM5-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),  # no form factor stated: the SXM part's name
        ("NVIDIA GB200 NVL72", "GB200-NVL72-186GB"),
    ],
)
def test_match_device_keeps_the_form_factor_the_name_states(
    catalog: GpuCatalog, reported: str, expected: str | None
) -> None:
    """issue 33: "NVIDIA H200 NVL" mapped to H200-SXM-141GB (its bandwidth, power and NVLink domain)."""
    spec = catalog.match_device(reported, memory_gib=140.0 if "H200" in reported else None)
    assert (spec.name if spec else None) == expected


def test_match_device_finds_an_nvl_part_a_users_catalog_adds(tmp_path: Path) -> None:
    rows = _rows(GPUS_CSV)
    sxm = next(r for r in rows if r["name"] == "H200-SXM-141GB")
    nvl = dict(
        sxm, name="H200-NVL-141GB", aliases="NVIDIA H200 NVL", form_factor="pcie", nvlink_domain_gpus="4"
    )
    cat = load_gpu_catalog(_write(tmp_path / "gpus.csv", [*rows, nvl]))
    for reported in ("NVIDIA H200 NVL", "NVIDIA-H200-NVL", "NVIDIA H200 NVL 141GB"):
        spec = cat.match_device(reported, memory_gib=140.0)
        assert spec is not None and spec.name == "H200-NVL-141GB", reported
    assert cat.match_device("NVIDIA H200") == cat.get("H200-SXM-141GB")


# --- a user's catalog ---------------------------------------------------------------------------


def _edited_copy(tmp_path: Path, price: str = "9.99") -> Path:
    rows = _rows(GPUS_CSV)
    for row in rows:
        if row["name"] == "L4-24GB":
            row["price_usd_per_hour"] = price
    return _write(tmp_path / "my-gpus.csv", rows)


def test_explicit_path_is_read(tmp_path: Path) -> None:
    path = _edited_copy(tmp_path)
    cat = load_gpu_catalog(path)

    assert cat.get("L4-24GB").price_usd_per_hour == 9.99
    assert cat.get("T4-16GB").price_usd_per_hour == load_gpu_catalog().get("T4-16GB").price_usd_per_hour
    assert cat.source == str(path)
    # MIG profiles come from the bundled file when the user gives none
    assert len(cat.get("A100-SXM4-80GB").mig_profiles) == len(
        load_gpu_catalog().get("A100-SXM4-80GB").mig_profiles
    )


def test_environment_variable_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _edited_copy(tmp_path)
    monkeypatch.setenv(GPU_CATALOG_ENV, str(path))

    cat = load_gpu_catalog()
    assert cat.get("L4-24GB").price_usd_per_hour == 9.99
    assert cat.source == str(path)


def test_explicit_path_wins_over_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    monkeypatch.setenv(GPU_CATALOG_ENV, str(_edited_copy(env_dir, price="1.11")))

    cat = load_gpu_catalog(_edited_copy(tmp_path, price="2.22"))
    assert cat.get("L4-24GB").price_usd_per_hour == 2.22


def test_a_small_user_catalog_with_a_new_gpu(tmp_path: Path) -> None:
    rows = [r for r in _rows(GPUS_CSV) if r["name"] == "L4-24GB"]
    new = dict(rows[0], name="My-Accel-32GB", aliases="ACME Accel", memory_gib="32", price_usd_per_hour="0.5")
    cat = load_gpu_catalog(_write(tmp_path / "gpus.csv", [*rows, new]))

    assert cat.names() == ("L4-24GB", "My-Accel-32GB")
    assert cat.get("acme accel").memory_gib == 32.0
    matched = cat.match_device("ACME Accel")
    assert matched is not None
    assert matched.name == "My-Accel-32GB"


def test_duplicated_name_is_refused(tmp_path: Path) -> None:
    rows = _rows(GPUS_CSV)
    rows.append(dict(rows[0]))
    path = _write(tmp_path / "gpus.csv", rows)
    line = len(rows) + 1  # header is line 1

    with pytest.raises(InvalidInput) as info:
        load_gpu_catalog(path)
    assert info.value.field == f"gpus.csv:{line}:name"
    assert "'V100-SXM2-16GB'" in str(info.value)
    assert "listed twice" in str(info.value)


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("memory_gib", "eighty", "is not a float"),
        ("hbm_bandwidth_gbps", "", "is not a float"),
        ("pcie_gen", "4.0", "is not a int"),
        ("price_usd_per_hour", "-1.5", "must not be negative"),
        ("compute_slices", "-7", "must not be negative"),
        ("price_usd_per_hour", "nan", "is not a finite number"),
        ("fp16_tflops", "inf", "is not a finite number"),
    ],
)
def test_bad_cell_names_the_cell_and_the_value(tmp_path: Path, column: str, value: str, problem: str) -> None:
    rows = _rows(GPUS_CSV)
    rows[2][column] = value  # third GPU → line 4
    path = _write(tmp_path / "gpus.csv", rows)

    with pytest.raises(InvalidInput) as info:
        load_gpu_catalog(path)
    err = info.value
    assert err.field == f"gpus.csv:4:{column}"
    assert err.value == value
    assert str(err).startswith(f"gpus.csv:4:{column}={value!r}: {problem}")


def test_unknown_form_factor_is_refused(tmp_path: Path) -> None:
    rows = _rows(GPUS_CSV)
    rows[0]["form_factor"] = "oam"

    with pytest.raises(InvalidInput, match=r"gpus\.csv:2:form_factor='oam': unknown"):
        load_gpu_catalog(_write(tmp_path / "gpus.csv", rows))


def test_missing_column_is_named(tmp_path: Path) -> None:
    rows = _rows(GPUS_CSV)
    columns = [c for c in GPU_COLUMNS if c != "price_usd_per_hour"]
    path = _write(tmp_path / "gpus.csv", rows, columns)

    with pytest.raises(InvalidInput) as info:
        load_gpu_catalog(path)
    assert info.value.field == "gpus.csv:columns"
    assert info.value.value == ["price_usd_per_hour"]
    assert "price_usd_per_hour" in str(info.value)
    assert "missing" in str(info.value)


@pytest.mark.parametrize("cut", [5, 14, 16])
def test_row_with_too_few_cells_is_refused(tmp_path: Path, cut: int) -> None:
    lines = GPUS_CSV.read_text().splitlines()
    lines[3] = ",".join(next(csv.reader([lines[3]]))[:cut])  # line 4: a truncated row
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join(lines) + "\n")

    with pytest.raises(InvalidInput) as info:
        load_gpu_catalog(path)
    assert info.value.field == "gpus.csv:4"
    assert f"has {cut} cells but the header has {len(GPU_COLUMNS)}" in str(info.value)


def test_row_with_an_unquoted_comma_is_refused(tmp_path: Path) -> None:
    lines = GPUS_CSV.read_text().splitlines()
    lines[1] += ",stray"  # e.g. an unquoted comma in price_source
    path = tmp_path / "gpus.csv"
    path.write_text("\n".join(lines) + "\n")

    with pytest.raises(InvalidInput, match=r"^gpus\.csv:2=20: has 20 cells but the header has 19"):
        load_gpu_catalog(path)


def test_nonexistent_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "gpus.csv"

    with pytest.raises(InvalidInput) as info:
        load_gpu_catalog(missing)
    assert info.value.field == "gpu_catalog"
    assert str(missing) in str(info.value)
    assert "no such file" in str(info.value)


def test_nonexistent_path_from_environment_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GPU_CATALOG_ENV, str(tmp_path / "typo.csv"))

    with pytest.raises(InvalidInput, match=r"typo\.csv"):
        load_gpu_catalog()


def test_directory_is_not_a_catalog(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        load_gpu_catalog(tmp_path)


def test_bad_mig_profile_name_is_refused(tmp_path: Path) -> None:
    rows = _rows(MIG_CSV)
    rows[0]["profile"] = "1g-5gb"
    path = _write(tmp_path / "mig.csv", rows)

    with pytest.raises(InvalidInput, match=r"^mig\.csv:2:profile='1g-5gb': is not a MIG profile name"):
        load_gpu_catalog(mig_path=path)


def test_mig_missing_column_is_named(tmp_path: Path) -> None:
    rows = _rows(MIG_CSV)
    path = _write(tmp_path / "mig.csv", rows, [c for c in MIG_COLUMNS if c != "max_instances"])

    with pytest.raises(InvalidInput, match=r"mig\.csv:columns=\['max_instances'\]: missing"):
        load_gpu_catalog(mig_path=path)
