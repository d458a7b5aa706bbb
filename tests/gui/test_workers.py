"""The GUI's one way to run background work: a lane per kind, results back on the GUI thread."""

from __future__ import annotations

import threading

import pytest

from inglenook.app.services.workers import Lane, Workers

pytestmark = pytest.mark.gui


@pytest.fixture
def workers(qapp):
    workers = Workers()
    yield workers
    workers.close()


def test_results_and_errors_come_back_on_the_gui_thread(qtbot, workers: Workers) -> None:
    gui = threading.current_thread()
    seen: list[tuple[str, object, bool]] = []
    workers.disk.run(lambda: threading.current_thread().name,
                     lambda name: seen.append(("done", name, threading.current_thread() is gui)))
    workers.disk.run(lambda: 1 / 0, None,
                     lambda exc: seen.append(("error", type(exc), threading.current_thread() is gui)))
    qtbot.waitUntil(lambda: len(seen) == 2)
    assert seen[0][0] == "done" and str(seen[0][1]).startswith("inglenook-disk-") and seen[0][2]
    assert seen[1] == ("error", ZeroDivisionError, True)


def test_long_work_of_one_kind_never_holds_up_another(qtbot, workers: Workers) -> None:
    release = threading.Event()
    finished: list[str] = []
    workers.downloads.run(lambda: release.wait(30), lambda _: finished.append("download"))
    workers.lab.run(lambda: release.wait(30), lambda _: finished.append("lab"))
    workers.disk.run(lambda: "quick", finished.append)
    qtbot.waitUntil(lambda: finished == ["quick"])  # while the download and the lab run still block
    release.set()
    qtbot.waitUntil(lambda: sorted(finished) == ["download", "lab", "quick"])


def test_one_thread_lanes_keep_order_and_relays_arrive_in_order(qtbot, qapp) -> None:
    lane = Lane("ordered")
    got: list[int] = []
    report = lane.relay(got.append)

    def work() -> None:
        for i in range(50):
            report(i)

    lane.run(work)
    lane.run(lambda: 50, got.append)
    assert lane.wait(10_000)
    qtbot.waitUntil(lambda: len(got) == 51)
    assert got == list(range(51))
    lane.close()
    lane.run(lambda: got.append(-1))  # dropped: the lane is closed
    assert lane.wait(1_000) and -1 not in got
