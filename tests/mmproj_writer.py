"""Write a tiny vision projector GGUF (``mmproj-*.gguf``) that llama.cpp's libmtmd loads.

No small vision model ships on PyPI, so the tests make one: a Gemma 3 style projector
(``clip.projector_type = "gemma3"``: a SigLIP vision transformer, average pooling, an RMS
norm and one projection into the text model's embedding space) with one transformer layer,
64x64 images in 8x8 patches and random weights. Its output width is the text model's
embedding size (576 for SmolLM2-135M), which is all libmtmd checks when it pairs the two.

The keys and tensor names are the ones llama.cpp's ``tools/mtmd/clip.cpp`` reads for that
projector type (``clip-impl.h``); shapes are written numpy-style (outermost first), which
the ``gguf`` package reverses into ggml's ``ne`` order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SMOLLM2_EMBEDDING = 576


def write_mmproj(
    path: Path,
    text_embedding: int = SMOLLM2_EMBEDDING,
    *,
    image_size: int = 64,
    patch_size: int = 8,
    merge: int = 2,
    width: int = 64,
    heads: int = 4,
    ffn: int = 128,
    layers: int = 1,
    seed: int = 0,
    projector_type: str = "gemma3",
    name: str = "Tiny Test Projector",
) -> Path:
    """A projector GGUF whose image tokens are ``(image_size / patch_size / merge) ** 2``
    vectors of ``text_embedding`` floats (16 of 576 by default)."""
    import gguf  # test-only dependency (the dev extra)

    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    patches = (image_size // patch_size) ** 2
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name(name)
    writer.add_file_type(0)  # all F32
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", projector_type)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", patch_size)
    writer.add_uint32("clip.vision.embedding_length", width)
    writer.add_uint32("clip.vision.feed_forward_length", ffn)
    writer.add_uint32("clip.vision.block_count", layers)
    writer.add_uint32("clip.vision.projection_dim", text_embedding)
    writer.add_uint32("clip.vision.attention.head_count", heads)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.vision.projector.scale_factor", merge)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    tensors: dict[str, np.ndarray] = {
        # conv kernel: ggml ne [KW, KH, C_in, C_out]
        "v.patch_embd.weight": weight(width, 3, patch_size, patch_size),
        "v.patch_embd.bias": zeros(width),
        "v.position_embd.weight": weight(patches, width),
        "v.post_ln.weight": ones(width),
        "v.post_ln.bias": zeros(width),
        "mm.soft_emb_norm.weight": ones(width),
        # transposed in the graph: ggml ne [text_embedding, width]. Scaled so that image
        # vectors (RMS-normed input, x 8 from 64 terms) are about as large as SmolLM2's token
        # embeddings: far larger ones would make rounding noise between batch shapes matter.
        "mm.input_projection.weight": weight(width, text_embedding, scale=0.02),
    }
    for layer in range(layers):
        block = f"v.blk.{layer}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[f"{block}.{part}.weight"] = weight(width, width)
            tensors[f"{block}.{part}.bias"] = zeros(width)
        for norm in ("ln1", "ln2"):
            tensors[f"{block}.{norm}.weight"] = ones(width)
            tensors[f"{block}.{norm}.bias"] = zeros(width)
        tensors[f"{block}.ffn_up.weight"] = weight(ffn, width)
        tensors[f"{block}.ffn_up.bias"] = zeros(ffn)
        tensors[f"{block}.ffn_down.weight"] = weight(width, ffn)
        tensors[f"{block}.ffn_down.bias"] = zeros(width)
    for tensor_name, data in tensors.items():
        writer.add_tensor(tensor_name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_png(path: Path, size: tuple[int, int] = (40, 30), seed: int = 1) -> Path:
    """A small RGB PNG of random pixels (a different ``seed`` is a different image)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels, "RGB").save(path, format="PNG")
    return path


def vision_copy_of_smollm2(smollm2_path: Path, folder: Path) -> Path:
    """A folder holding a copy of SmolLM2 renamed in its header (so the registry, which keeps
    one record per file content, sees a model of its own, not the starter) and its projector:
    the pair as a person would put them in the models folder. Returns the model's path."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "SmolVision-135M-Instruct-Q4_1.gguf"
    if not model.exists():
        data = bytearray(smollm2_path.read_bytes())
        name = b"Smollm2 135M 8k Lc100K Mix1 Ep2"
        at = data.find(name, 0, 1 << 20)
        assert at > 0, "SmolLM2's general.name was not where the helper expects it"
        data[at:at + len(name)] = b"SmolVis".ljust(len(name), b" ")  # same length: offsets unchanged
        partial = model.with_suffix(".partial")
        partial.write_bytes(bytes(data))
        partial.replace(model)
    projector = folder / "mmproj-SmolVision-135M-Instruct-f32.gguf"
    if not projector.exists():
        write_mmproj(projector)
    return model
