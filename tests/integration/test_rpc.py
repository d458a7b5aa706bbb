"""One model over several machines: two `inglenook worker`s on loopback (llama.cpp rpc-server),
`inglenook serve --rpc` splitting SmolLM2 across them and this machine, and a worker that dies."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.errors import InvalidRequest
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.core.engine import Engine
from inglenook.engine.remote.rpc import RpcError, check_worker_host, parse_workers, server_binary
from inglenook.engine.runtime.fit import ModelShape, rpc_split

pytestmark = pytest.mark.integration

STARTER = "smollm2-135m-instruct:q4_1"
# The same request to both: greedy, with each token's log-probability and the runners-up.
BODY = {"model": STARTER, "messages": [{"role": "user", "content": "Name three colours."}],
        "temperature": 0, "max_tokens": 24, "logprobs": True, "top_logprobs": 5}
# How far apart two runs of the same weights may put a token's log-probability. The workers'
# kernels are not the local process's (another CPU variant, the graph cut between processes),
# and their last bits differ (about 0.2 in a logit between variants, benchmarks/variant_logits.py);
# a split that computed the wrong thing is off by whole nats.
LOGPROB_MARGIN = 1.0


def assert_same_model(local: list[dict[str, Any]], split: list[dict[str, Any]]) -> None:
    """The split answer is the local one, token for token, except that where the local model
    had a near tie the split may take the runner-up (kernel noise decides a near tie), after
    which the two answers go on from different texts and are not compared."""
    for position, (mine, theirs) in enumerate(zip(local, split)):
        if mine["token"] == theirs["token"]:
            assert abs(mine["logprob"] - theirs["logprob"]) < LOGPROB_MARGIN, (position, mine, theirs)
            continue
        runners_up = {entry["token"]: entry["logprob"] for entry in mine["top_logprobs"]}
        assert theirs["token"] in runners_up, (position, mine, theirs)
        assert mine["logprob"] - runners_up[theirs["token"]] < LOGPROB_MARGIN, (position, mine, theirs)
        return
    assert len(local) == len(split)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def inglenook(*args: str, home: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, INGLENOOK_HOME=str(home), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "inglenook", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def first_line(process: subprocess.Popen[str], pattern: str, timeout_s: float = 180) -> re.Match[str]:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    for line in process.stdout:
        found = re.search(pattern, line)
        if found:
            return found
        assert time.monotonic() < deadline, f"no line matching {pattern!r}"
    raise AssertionError(f"the process ended without {pattern!r}: {process.stderr.read() if process.stderr else ''}")


def stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    return process.stderr.read() if process.stderr else ""


@pytest.fixture
def rpc_built() -> None:
    try:
        server_binary()
    except RpcError:
        pytest.skip("rpc-server is not built here (python scripts/llama_build.py rpc)")


@pytest.fixture
def rpc_home(home: Path, smollm2_path: Path) -> Path:  # the starter model gets registered
    engine = Engine()
    # q8_0 K/V: flash attention runs in both the split and the local load (llama.cpp turns it on
    # for offloaded layers), so the two compute the same logits. With f16 only the split would use
    # the CPU's f16 flash-attention kernel, whose rounding differs from the plain path.
    engine.update_settings(context_size=1024, kv_cache_type="q8_0")
    engine.close()
    return home


@pytest.fixture
def workers(rpc_built: None, rpc_home: Path) -> Iterator[list[tuple[str, subprocess.Popen[str], int]]]:
    started = []
    for _ in range(2):
        port = free_port()
        process = inglenook("worker", "--port", str(port), home=rpc_home)
        pid = int(first_line(process, r"rpc-server pid (\d+)", 60).group(1))
        started.append((f"127.0.0.1:{port}", process, pid))
    deadline = time.monotonic() + 30
    for endpoint, _, _ in started:  # listening once a connection is accepted
        host, port = endpoint.split(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
    yield started
    for _, process, _ in started:
        stop(process)


def local_answer(rpc_home: Path) -> list[dict[str, Any]]:
    """The local answer's tokens, each with its log-probability and runners-up."""
    engine = Engine()
    try:
        with ApiServer(engine, port=0) as server:
            response = httpx.post(server.url + "/chat/completions", json=BODY, timeout=300)
            return list(response.json()["choices"][0]["logprobs"]["content"])
    finally:
        engine.close()


def test_a_model_split_over_two_workers_answers_as_it_does_locally(rpc_home: Path, workers: list) -> None:
    expected = local_answer(rpc_home)
    endpoints = ",".join(endpoint for endpoint, _, _ in workers)
    serve = inglenook("serve", "--port", "0", "--rpc", endpoints, "--model", STARTER, home=rpc_home)
    try:
        url = first_line(serve, r"Serving the OpenAI-compatible API at (\S+)").group(1)
        response = httpx.post(url + "/chat/completions", json=BODY, timeout=300)
        assert response.status_code == 200, response.text
        assert_same_model(expected, response.json()["choices"][0]["logprobs"]["content"])

        # A worker disappears mid-answer: the stream ends with a clear error, the server stays up.
        long = dict(BODY, messages=[{"role": "user", "content": "Count from 1 to 1000."}], max_tokens=600,
                    stream=True, logit_bias={"0": -100, "2": -100})
        events = []
        with httpx.stream("POST", url + "/chat/completions", json=long, timeout=300) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if line.startswith("data: {"):
                    events.append(json.loads(line[6:]))
                    if len(events) == 3:
                        os.kill(workers[0][2], signal.SIGKILL)  # the worker's rpc-server, gone at once
                        break
            events += [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        error = events[-1]["error"]
        assert "RPC workers" in error["message"] and error["code"] == "remote_engine_error"
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=10).json()["status"] == "ok"
        # The next request says which worker is missing instead of hanging or crashing.
        refused = httpx.post(url + "/chat/completions", json=BODY, timeout=300)
        assert refused.status_code == 503
        assert workers[0][0] in refused.json()["error"]["message"]
    finally:
        stderr = stop(serve)
    split = re.search(r"RPC split: (\d+) layers here, (\d+) \+ (\d+) on the workers", stderr)
    assert split is not None, stderr
    assert int(split.group(2)) > 0 and int(split.group(3)) > 0  # both workers hold layers


def test_a_worker_binds_loopback_unless_the_network_is_acknowledged(rpc_built: None, rpc_home: Path) -> None:
    with pytest.raises(RpcError, match="no authentication"):
        check_worker_host("0.0.0.0", allow_network=False)
    check_worker_host("127.0.0.1", allow_network=False)
    check_worker_host("0.0.0.0", allow_network=True)
    refused = inglenook("worker", "--host", "0.0.0.0", "--port", str(free_port()), home=rpc_home)
    assert refused.wait(60) == 1
    assert "--allow-network" in (refused.stderr.read() if refused.stderr else "")


def test_workers_are_parsed_and_the_split_follows_free_memory(smollm2_path: Path) -> None:
    assert [w.endpoint for w in parse_workers("a:1, [::1]:50052")] == ["a:1", "[::1]:50052"]
    for bad in ("a", "a:0", "a:x", "a:1,a:1"):
        with pytest.raises(InvalidRequest):
            parse_workers(bad)
    shape = ModelShape.from_gguf(read_gguf(smollm2_path))
    gib = 1 << 30
    even = rpc_split(shape, 8 * gib, [8 * gib, 8 * gib])
    assert even.total_layers == shape.n_layers + 1
    assert even.gpu_layers == sum(even.worker_layers) and abs(even.worker_layers[0] - even.worker_layers[1]) <= 1
    assert even.local_layers + even.gpu_layers == even.total_layers
    lopsided = rpc_split(shape, 1 * gib, [3 * gib, 0])
    assert lopsided.worker_layers[1] == 0 and lopsided.worker_layers[0] > lopsided.local_layers
    starved = rpc_split(shape, 8 * gib, [1024, 1024])  # workers with almost no memory get nothing
    assert starved.gpu_layers == 0 and starved.local_layers == starved.total_layers
