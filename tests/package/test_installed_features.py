"""Everything the app does, from the installed .deb, as a user runs it (issue 43).

Each test runs the installed program with a fresh HOME, in a network namespace with only
loopback, and in a mount namespace where llama.cpp's build tree, the checkout's build folder
and the dev venv's llama_cpp are empty (desktop_session.as_a_user): what works here works on
a machine that never built anything. Installed once for the module (apt with
INGLENOOK_PACKAGE_TEST=1, else unpacked with dpkg-deb -x) and removed at the end.

- doctor: vision available (libmtmd loads), every CPU variant scored (each module loads);
- every ELF file of the engine's folder resolves all it links, and rpc-server starts;
- a PDF (PDFium, inside the bundle) and a DOCX are read into a collection;
- an MCP server over stdio is added, with a secret (the keyring keeps it, or the app says why
  not and where it went), and tested: its tools are listed;
- an image request reaches libmtmd, with the synthetic projector pair the tests write;
- the search model (a tiny BERT encoder) embeds through the installed API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..document_files import docx_file, report_pdf
from ..encoder_writer import write_encoder
from ..mmproj_writer import vision_copy_of_smollm2, write_png
from .desktop_session import as_a_user, cannot_run, install, launch, missing_tools, newest_deb, uninstall, \
    user_environment, xvfb

pytestmark = pytest.mark.package

DEB = newest_deb()
if DEB is None:
    cannot_run("no .deb in dist/: run `make package` (or `make package-test`) first")
if missing_tools():
    cannot_run(f"missing tools for the installed-app tests: {', '.join(missing_tools())} "
               "(python3 scripts/package_deps.py --install)")
if os.geteuid() != 0:
    cannot_run("the installed-app tests run the app in its own network and mount namespaces, which needs root")

X86_VARIANTS = {"haswell", "alderlake", "skylakex", "icelake", "zen4"}  # scripts/llama_build.py's list


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    assert DEB is not None
    scratch = tmp_path_factory.mktemp("installed")
    installed = install(DEB, scratch / "root")
    yield installed
    uninstall(scratch / "root")


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    return home


def cli(program: Path, home: Path, *args: str, timeout: float = 900,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``inglenook ARGS`` as the user types it: fresh HOME, no DISPLAY, offline, no build tree."""
    env = {**user_environment(home, display=""), **(extra_env or {})}
    env.pop("DISPLAY")
    return subprocess.run(as_a_user([str(program), *args]), env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=home)


def model_id(program: Path, home: Path, word: str) -> str:
    listed = cli(program, home, "list")
    assert listed.returncode == 0, listed.stderr
    return next(line.split()[0] for line in listed.stdout.splitlines() if word in line.lower())


def test_doctor_reports_vision_and_loads_every_cpu_variant(program: Path, user_home: Path) -> None:
    done = cli(program, user_home, "doctor", "--json", "--no-self-test")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["Versions"]["vision"].startswith("available"), report["Versions"]["vision"]
    assert str(program) in report["Versions"]["Python"]  # the installed program, not a venv
    assert "CPU" in report["Backends"]["loaded"]
    if os.uname().machine == "x86_64":
        assert set(report["details"]["cpu_variants"]) == X86_VARIANTS  # each module loaded to be scored


def test_every_engine_library_resolves_from_the_installed_folder_and_rpc_server_starts(program: Path) -> None:
    """ldd over every ELF file in llama_cpp/lib, with LD_LIBRARY_PATH as the bundle's
    bootloader sets it, where the build tree is hidden: nothing 'not found', nothing found
    outside the installed folder but system libraries. Then rpc-server (started by `inglenook
    worker` without the bootloader's LD_LIBRARY_PATH) prints its usage."""
    internal = program.parent / "_internal"
    engine = internal / "llama_cpp" / "lib"
    elves = [p for p in sorted(engine.iterdir()) if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert {p.name for p in elves} >= {"libllama.so", "libllama.so.0", "libmtmd.so.0", "libggml.so.0",
                                       "libggml-base.so.0", "libggml-rpc.so", "rpc-server"}
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": str(internal)}
    for path in elves:
        done = subprocess.run(as_a_user(["ldd", str(path)]), env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "not found" not in done.stdout, f"{path.name}:\n{done.stdout}"
        for line in done.stdout.splitlines():
            if " => " in line:
                resolved = line.split(" => ")[1].split(" (")[0]
                assert resolved.startswith((str(internal), "/lib", "/usr/lib")), f"{path.name}: {line.strip()}"
    server = subprocess.run(as_a_user([str(engine / "rpc-server"), "--help"]), env={"PATH": os.environ["PATH"]},
                            capture_output=True, text=True, timeout=60)
    assert "error while loading shared libraries" not in server.stderr, server.stderr
    assert "usage" in (server.stdout + server.stderr).lower(), server.stdout + server.stderr


def test_a_pdf_and_a_docx_are_read(program: Path, user_home: Path, tmp_path: Path) -> None:
    pdf = report_pdf(tmp_path / "report.pdf", n_pages=3)
    docx = docx_file(tmp_path / "tenancy.docx")
    added = cli(program, user_home, "docs", "add", "papers", str(pdf), str(docx))
    assert added.returncode == 0, added.stdout + added.stderr
    assert "Traceback" not in added.stderr
    listed = cli(program, user_home, "docs", "list", "papers")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert rows[str(pdf)][1:3] == ["pdf", "3"], listed.stdout  # PDFium counted the pages
    assert rows[str(docx)][1] == "docx", listed.stdout


def test_an_mcp_server_over_stdio_is_added_with_a_secret_and_tested(program: Path, user_home: Path) -> None:
    """The server is the dev venv's mcp-server-time (a real stdio MCP server); the installed
    app starts it, lists its tools. The secret goes to the system keyring, or, where there is
    none (a fresh HOME has no Secret Service), to a file only its owner reads, with a warning
    that says so."""
    added = cli(program, user_home, "mcp", "add", "--env", "CLOCK_TOKEN=s3cret", "clock", "--",
                sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
    assert added.returncode == 0, added.stdout + added.stderr
    assert "Added the MCP server clock" in added.stdout
    secrets_file = user_home / ".local" / "share" / "Inglenook" / "mcp-secrets.json"
    if "no system keyring" in added.stderr:
        assert str(secrets_file) in added.stderr.replace("\n", "")
        assert secrets_file.stat().st_mode & 0o077 == 0
        assert "s3cret" in secrets_file.read_text()
    else:
        assert not secrets_file.exists(), added.stderr  # kept in the keyring
    tested = cli(program, user_home, "mcp", "test", "clock", timeout=300)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "get_current_time" in tested.stdout


def test_an_image_request_reaches_libmtmd(program: Path, user_home: Path, tmp_path: Path,
                                          smollm2_path: Path) -> None:
    model = vision_copy_of_smollm2(smollm2_path, tmp_path / "smolvision")  # with its mmproj-*.gguf
    imported = cli(program, user_home, "import", str(model.parent))
    assert imported.returncode == 0, imported.stderr
    vision = model_id(program, user_home, "smolvision")
    shown = cli(program, user_home, "show", vision)
    assert "mmproj-SmolVision-135M-Instruct-f32.gguf (gemma3)" in shown.stdout, shown.stdout
    shot = write_png(tmp_path / "shot.png")
    answered = cli(program, user_home, "run", vision, "--image", str(shot), "What is in the picture?",
                   "--max-tokens", "4", "--temperature", "0", "--verbose")
    assert answered.returncode == 0, answered.stderr
    assert "prompt tokens:" in answered.stderr and "Traceback" not in answered.stderr


EMBED_SCRIPT = """
import json, time
from openai import OpenAI
client = OpenAI(base_url="http://127.0.0.1:8484/v1", api_key="unused", timeout=600, max_retries=0)
for attempt in range(600):
    try:
        client.models.list()
        break
    except Exception:
        time.sleep(0.5)
vectors = client.embeddings.create(model=MODEL, input=["the harbour mill", "the church roof"]).data
print(json.dumps({"widths": [len(v.embedding) for v in vectors]}))
"""


def test_the_search_model_embeds_through_the_installed_api(program: Path, user_home: Path, tmp_path: Path) -> None:
    encoder = write_encoder(tmp_path / "tiny-encoder-F32.gguf")
    imported = cli(program, user_home, "import", str(encoder))
    assert imported.returncode == 0, imported.stderr
    encoder_id = model_id(program, user_home, "encoder")
    with xvfb() as display:  # serve needs no display; launch() wants one for its environment
        server = launch([str(program), "serve", "--port", "8484"], user_home, display)
        try:
            reply = server.api(EMBED_SCRIPT.replace("MODEL", repr(encoder_id)))
        finally:
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(60)
    assert reply["widths"] == [32, 32], server.log_text()  # the encoder's width



def test_a_recording_is_transcribed_and_the_starter_voice_speaks(program: Path, user_home: Path,
                                                                  tmp_path: Path) -> None:
    """Whisper (CTranslate2, PyAV, the VAD model, the starter model) works from the bundle, and
    so does Piper: its separate program `inglenook-voice` (GPL-3.0, never inside Inglenook's
    own archive) speaks with the bundled starter voice, and what it says is heard back."""
    from inglenook.engine import Speech, encode_pcm

    from ..voice.conftest import MAX_WER, SENTENCES, word_error_rate

    speech = Speech()
    try:
        rate, pcm = speech.speak(SENTENCES[0])  # the dev venv's voice makes the recording
        recording = tmp_path / "note.mp3"
        recording.write_bytes(encode_pcm(b"".join(pcm), rate, "mp3"))
    except Exception as exc:  # noqa: BLE001 — no voice in this venv: nothing to transcribe
        pytest.skip(f"the dev venv cannot speak the test sentence: {exc}")
    finally:
        speech.close()
    heard = cli(program, user_home, "transcribe", str(recording))
    assert heard.returncode == 0, heard.stderr
    assert word_error_rate([SENTENCES[0]], [heard.stdout]) <= MAX_WER, heard.stdout
    assert (program.resolve().parent / "inglenook-voice").is_file()
    spoken = tmp_path / "spoken.wav"
    said = cli(program, user_home, "say", SENTENCES[1], "-o", str(spoken))
    assert said.returncode == 0 and "Traceback" not in said.stderr, said.stderr
    heard_back = cli(program, user_home, "transcribe", str(spoken))
    assert heard_back.returncode == 0, heard_back.stderr
    assert word_error_rate([SENTENCES[1]], [heard_back.stdout]) <= MAX_WER, heard_back.stdout


def test_the_installed_doctor_hears_the_sound_servers_devices(program: Path, user_home: Path, tmp_path: Path) -> None:
    """Qt Multimedia is in the bundle without its media backend (QAudioSource and QAudioSink need
    none) and finds a PulseAudio server's microphone and speaker through the system's libpulse."""
    from tests import audio_device

    if audio_device.missing():
        pytest.fail(f"make package-test checks sound devices: {audio_device.missing()}")
    server = audio_device.PulseServer(tmp_path / "pulse")
    try:
        done = cli(program, user_home, "doctor", "--json", "--no-self-test", extra_env={"PULSE_SERVER": server.address})
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    sound = json.loads(done.stdout)["details"]["sound"]
    assert "Test-microphone" in sound["inputs"] and "Test-speakers" in sound["outputs"], sound
