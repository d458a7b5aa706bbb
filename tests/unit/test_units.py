"""The one spelling of sizes, counts and durations, shared by the terminal and the window."""

from inglenook.engine import human_count, human_duration, human_size


def test_durations_read_coarse_to_fine() -> None:
    assert human_duration(0.4) == "0 s"
    assert human_duration(59.4) == "59 s"
    assert human_duration(65) == "1 min 05 s"
    assert human_duration(3725) == "1 h 02 min"
    assert human_duration(-3) == "0 s"  # an estimate that overshot never reads as negative


def test_sizes_and_counts() -> None:
    assert human_size(512) == "512 B"
    assert human_size(98_400_000) == "98.4 MB"
    assert human_count(134_515_008) == "134.5M"
    assert human_count(5000) == "5K"
