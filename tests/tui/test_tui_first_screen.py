"""The first screen answers "what runs on my card and how fast" without a key press: the four lines
(runs as · decode · KV pool · max context) the piped output and the report also lead with; every key
is in the footer at 80 columns; focus is visible; the Explain tab leads with its answer."""

from __future__ import annotations

import pytest
from textual.widgets import Footer, Select, Static
from textual.widgets._footer import FooterKey

from advisor.services import views
from advisor.services.analysis import analyze
from advisor.services.answer import answer_pairs
from advisor.tui.docview import DocView

pytestmark = pytest.mark.timeout(300)
LABELS = ["runs as", "decode (1 stream)", "KV pool", "max context"]


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def _answer(app) -> dict:
    view = app.query_one("#hardware-view", DocView)
    block = next(b for b in view.doc.blocks if getattr(b, "pairs", None) and b.pairs[0][0] == "runs as")
    return dict(block.pairs)


async def test_start_screen_shows_the_answer_in_the_first_screen(make_app):
    app = make_app()                         # no GPU, nothing remembered: the demo on the what-if card
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.query_one("#tabs").active == "hardware"
        shown = _answer(app)
        assert list(shown) == LABELS
        assert shown == dict(answer_pairs(analyze(app.analysis.selection)))
        decode = app.analysis.plan.to_json()["predictions"]["decode_tok_s"]
        assert shown["decode (1 stream)"].startswith(f"{decode:,.1f} tok/s")
        # on screen without scrolling: the answer's widget ends above the status line and the footer
        first = app.query_one("#hardware-view", DocView).query(Static).first()
        assert first.region.y >= 0 and first.region.bottom <= app.size.height - 2
        assert "No GPU here" in app.query_one("#hardware-view", DocView).text      # the what-if is said


async def test_the_answer_follows_the_gpu_and_never_shows_a_stale_one(make_app):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        before = _answer(app)
        app.query_one("#gpu-select", Select).value = "rtx-5090"
        await pilot.pause()
        text = app.query_one("#hardware-view", DocView).text
        if app.analysis.selection.gpu_id != "rtx-5090":           # still working: no 3090 numbers meanwhile
            assert "Working out the answer" in text and before["decode (1 stream)"] not in text
        await settle(app, pilot)
        after = _answer(app)
        assert after == dict(answer_pairs(analyze(app.analysis.selection)))
        assert after["decode (1 stream)"] != before["decode (1 stream)"]
        assert "FP4 tensor cores" in after["runs as"]                    # sm_120 runs W4A4 natively


async def test_footer_shows_every_key_within_80_columns(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        keys = {k.key: k for k in app.query_one(Footer).query(FooterKey)}
        for key in ("f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "ctrl+l", "ctrl+x", "ctrl+q"):
            assert key in keys, sorted(keys)
            region = keys[key].region
            assert region.width > 0 and region.right <= 80, (key, region)
        spans = sorted((k.region.x, k.region.right) for k in keys.values())
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans   # no overlap


async def test_focus_is_visible_on_views(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        view = app.query_one("#hardware-view", DocView)
        assert view.styles.border_left[0] in ("", "blank", "none")
        view.focus()
        await pilot.pause()
        assert view.has_focus and view.styles.border_left[0] == "thick"


async def test_explain_tab_leads_with_the_answer_install_detail_below(make_app):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        blocks = app.query_one("#explain-view", DocView).doc.blocks
        assert blocks[1].text == app.analysis.explanation.summary        # the heading, then the answer
        install = [i for i, b in enumerate(blocks) if any(k == "install" for k, _ in getattr(b, "pairs", ()))]
        assert install and install[0] == len(blocks) - 1                 # one level down: the last section
        assert blocks[install[0] - 1].text == "Installed engine parts this answer assumes"
        assert not any(k == "install" for b in blocks[:3] for k, _ in getattr(b, "pairs", ()))


def test_piped_answer_prints_the_same_four_lines():
    from tests_tui_helpers import no_gpu_probe_result as no_gpu_probe

    from advisor.services.analysis import Selection

    a = analyze(Selection("demo:qwen3-8b-nvfp4", "rtx-3090"))
    doc = views.plain_doc(no_gpu_probe(), a)
    block = next(b for b in doc.blocks if getattr(b, "pairs", None) and b.pairs[0][0] == "runs as")
    assert block.pairs == answer_pairs(a)
