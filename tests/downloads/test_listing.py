"""A repo's files grouped into quantization options; picking one; reading a remote header."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base.errors import DownloadError
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.models.hub import (
    HubClient, RemoteFile, RepoListing, fit_options, group_files, is_safe_remote_path, quant_from_name,
)
from inglenook.engine.runtime.fit import MachineMemory, ModelShape
from tests.downloads.conftest import SMOL_REPO
from tests.hubmock import HubMock

GB = 1_000_000_000
STEM = "Llama-3.2-3B-Instruct"


def bartowski_like() -> list[RemoteFile]:
    sizes = {"Q4_K_M": 2.02, "Q4_K_S": 1.93, "IQ4_XS": 1.83, "Q8_0": 3.42, "f16": 6.43, "bf16": 6.43, "Q2_K": 1.36}
    files = [RemoteFile(f"{STEM}-{q}.gguf", int(s * GB), f"{i:064x}") for i, (q, s) in enumerate(sizes.items())]
    files += [
        RemoteFile(f"Q6_K/{STEM}-Q6_K-00001-of-00002.gguf", int(1.5 * GB), "a" * 64),
        RemoteFile(f"Q6_K/{STEM}-Q6_K-00002-of-00002.gguf", int(1.14 * GB), "b" * 64),
        RemoteFile(f"{STEM}-Q3_K_M-00001-of-00003.gguf", GB, "c" * 64),  # parts 2 and 3 are missing
        RemoteFile("mmproj-model-f16.gguf", 600_000_000, "d" * 64),
        RemoteFile("README.md", 4000, None),
    ]
    return files


@pytest.mark.parametrize(("name", "quant"), [
    ("llama-2-7b.Q4_K_M.gguf", "Q4_K_M"),
    ("model-q4_k_m.gguf", "Q4_K_M"),
    ("ggml-model-f16.gguf", "F16"),
    ("gemma-3-270m-it-UD-Q4_K_XL.gguf", "Q4_K_XL"),
    ("Q5_K_M/model-00001-of-00002.gguf", "Q5_K_M"),
    ("Qwen2.5-0.5B-Instruct-IQ2_XXS.gguf", "IQ2_XXS"),
    ("phi-3-mini-4k-instruct-bf16.gguf", "BF16"),
    ("no-quant-here.gguf", None),
])
def test_quant_from_name(name: str, quant: str | None) -> None:
    assert quant_from_name(name) == quant


@pytest.mark.parametrize("name", ["../x.gguf", "/abs/x.gguf", "a\\b.gguf", "C:x.gguf", "a//b.gguf", "a/./b.gguf",
                                  "a/../b.gguf", "", "bad\nname.gguf"])
def test_unsafe_names(name: str) -> None:
    assert not is_safe_remote_path(name)


def test_safe_names() -> None:
    assert is_safe_remote_path("Q4_K_M/model-Q4_K_M-00001-of-00002.gguf")
    assert is_safe_remote_path("model.Q4_0.gguf")


def test_grouping_joins_split_sets_and_drops_what_is_not_a_model() -> None:
    options, rejected = group_files(bartowski_like(), parameters=3_212_749_888)
    listing = RepoListing("bartowski/Llama-3.2-3B-Instruct-GGUF", "0" * 40, options, parameters=3_212_749_888,
                          rejected=rejected)
    groups = listing.by_quant()
    assert list(groups) == ["Q2_K", "IQ4_XS", "Q4_K_S", "Q4_K_M", "Q6_K", "Q8_0", "BF16", "F16"]
    q6 = groups["Q6_K"][0]
    assert q6.is_split and q6.size == int(2.64 * GB)
    assert [f.path.rsplit("-", 3)[-3] for f in q6.files] == ["00001", "00002"]
    assert q6.display_name == f"{STEM}-Q6_K.gguf (2 parts)"
    assert rejected == [f"{STEM}-Q3_K_M (1 of 3 parts)"]
    q4 = groups["Q4_K_M"][0]
    assert q4.bits_per_weight == pytest.approx(2.02 * GB * 8 / 3_212_749_888)
    assert not q4.bpw_is_nominal


def test_pick_defaults_to_q4_k_m_then_the_closest_four_bit() -> None:
    options, _ = group_files(bartowski_like())
    listing = RepoListing("o/r", None, options)
    assert listing.pick().quant == "Q4_K_M"
    assert listing.pick("q8_0").quant == "Q8_0"
    assert listing.pick(f"{STEM}-Q2_K.gguf").quant == "Q2_K"
    with pytest.raises(DownloadError, match="no Q3_K_M file; available: Q2_K, IQ4_XS"):
        listing.pick("Q3_K_M")
    without = RepoListing("o/r", None, [o for o in options if o.quant != "Q4_K_M"])
    assert without.pick().quant == "Q4_K_S"
    # No 4-bit file at all: the nearest in bits per weight (6.57 is nearer 4.9 than 3.17 is).
    no_four = RepoListing("o/r", None, [o for o in options if o.quant in ("Q8_0", "Q6_K", "Q2_K")])
    assert no_four.pick().quant == "Q6_K"
    assert RepoListing("o/r", None, [o for o in options if o.quant in ("Q8_0", "Q2_K")]).pick().quant == "Q2_K"
    # Without a parameter count the nominal bits per weight of the type stand in.
    assert listing.pick().bpw_is_nominal and listing.pick().bits_per_weight == 4.9
    with pytest.raises(DownloadError, match="no GGUF model files"):
        RepoListing("o/r", None, []).pick()


def test_remote_header_gives_the_shape_for_fit_estimates(hub: HubMock, smollm2_path: Path) -> None:
    client = HubClient(endpoint=hub.endpoint)
    listing = client.list_files(SMOL_REPO)
    shape = client.shape(SMOL_REPO, listing)
    local = ModelShape.from_gguf(read_gguf(smollm2_path))
    assert (shape.n_layers, shape.n_head_kv, shape.head_dim_k, shape.n_vocab) == (30, 3, 64, 49152)
    assert shape.input_embd_bytes == local.input_embd_bytes
    ranged = [r for r in hub.blob_gets() if r.range]
    assert ranged and ranged[0].range == "bytes=0-4194303" and ranged[0].status == 206
    machine = MachineMemory(8 * 1024**3, 8 * 1024**3)
    estimates = fit_options(listing, shape, machine, context=8192)
    assert estimates[listing.options[0].name].label == "CPU only"
