"""Pick the variant to recommend and say why in one line."""

from __future__ import annotations

from dataclasses import dataclass

from .results import LabResult

# A variant that agrees with the reference on the most likely next token this often is,
# in practice, hard to tell apart from it in conversation.
GOOD_AGREEMENT = 0.90


@dataclass(frozen=True)
class Recommendation:
    model_id: str
    line: str


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def recommend(results: list[LabResult], available_ram: int) -> Recommendation | None:
    """The smallest variant close enough to the reference that fits in memory.

    Smaller means faster and leaves more room; "close enough" is GOOD_AGREEMENT on the top
    token. When none is close enough, the one closest to the reference that fits.
    """
    # (result, its RAM, its agreement) for the results that measured both.
    usable = [
        (r, r.ram_bytes, r.same_top)
        for r in results
        if not r.stale and r.same_top is not None and r.ram_bytes is not None
    ]
    fits = [(r, ram, same_top) for r, ram, same_top in usable if ram < available_ram]
    if not fits:
        return None
    good = [entry for entry in fits if entry[2] >= GOOD_AGREEMENT]
    choice, ram_bytes, same_top = (
        min(good, key=lambda entry: entry[0].size_bytes) if good else max(fits, key=lambda entry: entry[2])
    )
    spare = available_ram - ram_bytes
    speed = "speed not measured"
    if choice.decode_tps:
        speed = f"{choice.decode_tps:.0f} tok/s" if choice.decode_tps >= 10 else f"{choice.decode_tps:.1f} tok/s"
    gpu = f", {_gb(choice.vram_bytes)} on the GPU" if choice.vram_bytes else ""
    line = (
        f"{choice.quantization}: {same_top * 100:.1f}% same top token, {speed}{gpu}, "
        f"fits in RAM with {_gb(spare)} to spare"
    )
    if not good:
        line += " (no variant reaches 90% agreement; this one is closest to the reference)"
    return Recommendation(choice.model_id, line)
