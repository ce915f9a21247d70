"""PNG heatmaps with a Hangul font (inspection/plot.py): the font, every label drawn without a missing glyph,
each head's role in its title.

    python -m pytest tests/test_plot.py -q
"""

import warnings

from tests.conftest import LABELS, random_maps


def test_font_is_nanumgothic_with_hangul_glyphs():
    # the font itself, by its name table and its glyphs, not its path: a system's fonts-nanum copy is as good
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    from inspection.plot import font_paths

    prop = font_manager.FontProperties(family="NanumGothic")
    for path in (font_paths()[0], font_manager.findfont(prop, fallback_to_default=False)):
        font = TTFont(path)
        assert font["name"].getBestFamilyName() == "NanumGothic", path
        cmap = font.getBestCmap()
        assert all(ord(ch) in cmap for ch in "대한민국서울은가나다힣"), path


def test_png_labels_are_covered_by_the_fonts_and_draw_without_missing_glyphs(tmp_path):
    from fontTools.ttLib import TTFont
    from PIL import Image

    from inspection.plot import draw_layer, drawable, font_paths, save_figure, save_layer_pngs

    assert drawable("대𓀀") == "대<U+13000>"
    covered = set().union(*(TTFont(p).getBestCmap() for p in font_paths()))
    assert all(ord(ch) in covered for label in LABELS for ch in drawable(label))
    weights = random_maps(2, 3, len(LABELS))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = save_layer_pngs(weights, LABELS, tmp_path)
    assert [p.name for p in paths] == ["layer_0.png", "layer_1.png"]
    assert not [w for w in caught if "missing from font" in str(w.message)]
    with Image.open(paths[0]) as image:
        assert image.format == "PNG" and image.width > 600
    # The check can fail: a label drawn without the Korean font warns about missing glyphs.
    fig = draw_layer(weights, LABELS, 0)
    fig.axes[0].set_title("대한", family="DejaVu Sans")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        save_figure(fig, tmp_path / "bad.png")
    assert any("missing from font" in str(w.message) for w in caught)


def test_png_titles_name_each_heads_role():
    from inspection.plot import draw_layer

    roles = [["previous-token 0.97", "mixed 0.20"]]
    fig = draw_layer(random_maps(1, 2, 5), LABELS[:5], 0, roles=roles)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["layer 0 head 0 · previous-token 0.97", "layer 0 head 1 · mixed 0.20"]


def test_the_word_patch_and_layer_pngs_under_korean_hold_no_english_sentence_and_say_what_a_word_s_value_is():
    """Every text of the word PNG (a word's value a sum over its tokens, its rows and columns words), of the
    patching PNG and of a layer's PNG with a head switched off, drawn under Korean: Korean but for the kept terms;
    the same figures in English are caught."""
    import numpy as np

    from cli.messages import messages
    from inspection.plot import draw_layer, draw_patch
    from inspection.views.words import word_labels, word_maps, word_spans
    from tests.conftest import english_sentences, figure_texts

    labels = ["<|endoftext|>", "대한", "민국", "␣국회", "는", "␣법률", "을"]
    words = word_spans(labels)
    by_word = word_maps(random_maps(1, 2, len(labels)), words)
    record = {"grid": np.linspace(-1, 1, 3 * len(labels)).reshape(3, len(labels)), "token": "␣법률", "versus": "␣국회",
              "labels": labels, "corrupt_labels": labels[:5] + ["␣정부", "를"], "changed": [5, 6]}
    for lang in ("en", "ko"):
        say = messages(lang)
        word_png = draw_layer(by_word, word_labels(labels, words), 0, lang=lang, words=True)
        assert word_png.get_suptitle() == say("plot.layer_words", layer=0)
        assert (word_png.axes[0].get_xlabel(), word_png.axes[0].get_ylabel()) == (say("plot.key_word"),
                                                                                   say("plot.query_word"))
        axis_words = word_png.axes[0].get_xlabel() + word_png.axes[0].get_ylabel()
        assert ("어절" in axis_words and "토큰" not in axis_words) if lang == "ko" else "token" not in axis_words
        patch_png = draw_patch(record, labels, lang)
        off = [["mean", ""]]  # a switched-off head's title and the figure's note on it too
        layer_png = draw_layer(random_maps(1, 2, len(labels)), labels, 0, lang=lang, off=off)
        texts = figure_texts(word_png) + figure_texts(patch_png) + figure_texts(layer_png)
        assert say("patch.colour") in texts
        found = [s for text in texts for s in english_sentences(text)]
        assert (found == []) == (lang == "ko"), found
    assert "어절" in messages("ko")("plot.layer_words", layer=0) and "합" in messages("ko")("plot.layer_words", layer=0)


def test_patch_png_s_title_names_both_texts_and_the_page_says_patching_once():
    """patch.png's title holds the clean text and the corrupted one, each with the tokens where they differ in
    brackets; the patch section's heading and its first sentence do not both say "patching:"."""
    import numpy as np

    from cli.messages import messages
    from inspection.plot import draw_patch

    labels = ["<|endoftext|>", "긴", "␣보", "␣그", "␣략", "␣긴", "␣보", "␣그"]
    record = {"grid": np.zeros((3, len(labels))), "token": "␣략", "versus": "␣수", "labels": labels,
              "corrupt_labels": labels[:4] + ["␣수"] + labels[5:], "changed": [4]}
    titles = {lang: draw_patch(record, labels, lang).axes[0].get_title() for lang in ("en", "ko")}
    assert titles["en"].split("\n") == ["clean text: 긴 보 그 [략] 긴 보 그", "corrupted text: 긴 보 그 [수] 긴 보 그",
                                        "the clean run's streams put into the corrupted run: ␣략 against ␣수"]
    assert titles["ko"].split("\n")[:2] == ["깨끗한 텍스트: 긴 보 그 [략] 긴 보 그", "바꾼 텍스트: 긴 보 그 [수] 긴 보 그"]
    for lang in ("en", "ko"):
        say = messages(lang)
        shown = say("page.patch_title") + " " + say("patch.title", token="a", versus="b", clean="1", corrupt="0")
        assert shown.lower().count("patching") == 1
