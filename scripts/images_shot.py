"""Screenshots of images in chats (issue 31): the composer with an image waiting, the
conversation with its thumbnail, the viewer, and a text-only model's note offering the
vision model.

Runs like scripts/screenshots.py (offscreen, 1280x800, a throwaway INGLENOOK_HOME). The vision
model is the tests' pair: a renamed copy of the starter SmolLM2 and a projector with random
weights (tests/mmproj_writer.py), so the answer says nothing about the picture.

    .venv/bin/python scripts/images_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from screenshots import settle, wait  # noqa: E402 — after the path set-up


def scene(path: Path) -> Path:
    """A small picture worth looking at: sky, sun, hills and a house."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (640, 420))
    draw = ImageDraw.Draw(image)
    for y in range(420):
        draw.line([(0, y), (640, y)], fill=(120 + y // 6, 170 + y // 8, 235))
    draw.ellipse((470, 50, 560, 140), fill=(255, 214, 90))
    draw.polygon([(0, 300), (180, 210), (380, 290), (640, 220), (640, 420), (0, 420)], fill=(96, 160, 84))
    draw.polygon([(0, 360), (260, 300), (640, 350), (640, 420), (0, 420)], fill=(70, 130, 64))
    draw.rectangle((250, 250, 370, 340), fill=(222, 196, 160))
    draw.polygon([(240, 252), (310, 200), (380, 252)], fill=(170, 70, 60))
    draw.rectangle((298, 290, 322, 340), fill=(120, 80, 50))
    image.save(path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="inglenook-image-shots-"))
    os.environ["INGLENOOK_HOME"] = str(home)

    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine, Paths
    from inglenook.engine.models.starter import find_starter_model
    from tests.conftest import MODEL_CACHE
    from tests.mmproj_writer import vision_copy_of_smollm2

    starter = find_starter_model()
    assert starter is not None, "the starter model package is not installed"
    model = vision_copy_of_smollm2(starter, MODEL_CACHE / "smolvision")
    folder = Paths.under(home).ensure().models / "smolvision"
    folder.mkdir(parents=True)
    for source in (model, *model.parent.glob("mmproj-*.gguf")):
        os.symlink(source, folder / source.name)
    picture = scene(home / "garden.png")

    app = QApplication(sys.argv)
    engine = Engine()
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=False)
    window.resize(1280, 800)
    window.show()
    try:
        wait(app, lambda: bool(window.model_list.models))
        vision = next(m.id for m in window.model_list.models if "smolvis" in m.id.lower())
        chats = window.engine.chats

        # A text-only chat: the note under the image, offering the vision model.
        plain = chats.new_conversation(title="Holiday photos", sampling={"temperature": 0.0, "max_tokens": 24})
        window.conversations.refresh()
        window.open_conversation(plain.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == plain.id)
        window.images.add_paths([picture])
        wait(app, lambda: window.composer.attachments.vision_note.isVisible())
        window.composer.set_text("What is in this picture?")
        settle(app)
        window.grab().save(str(out / "image-text-only.png"))
        window.images.take()

        # The vision chat: the image waiting in the composer, then the question sent with it.
        chat = chats.new_conversation(title="A garden drawing", model_id=vision,
                                      sampling={"temperature": 0.0, "max_tokens": 24})
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
        window.images.add_paths([picture])
        wait(app, lambda: len(window.composer.attachments.image_chips) == 1 and window.images.problem is None)
        window.composer.set_text("What is in this picture?")
        settle(app)
        window.grab().save(str(out / "image-composer.png"))
        window.composer.submit()
        wait(app, lambda: not window.chat.is_streaming(chat.id) and window.view.streaming_widget() is None)
        settle(app)
        window.grab().save(str(out / "image-conversation.png"))
        window.view.widgets[0].picture_row.buttons[0].click()
        wait(app, lambda: window.images.viewer is not None and window.images.viewer.isVisible())
        settle(app)
        window.images.viewer.grab().save(str(out / "image-viewer.png"))
        window.images.viewer.close()
    finally:
        window.shutdown()
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
