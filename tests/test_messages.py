"""The teaching texts in two languages (inspection/messages.py): the table is whole, the Korean texts carry the
English ones' numbers, generate.py speaks the language asked for (or the locale's), and the page switches in place.

    python -m pytest tests/test_messages.py -q
"""

import re

import numpy as np
import pytest

import generate
from inspection.explain import explain_head
from inspection.heads import measure_heads, format_roles_table
from inspection.html import save_html
from inspection.messages import LANGUAGES, MESSAGES, fields_of, locale_language, messages
from inspection.stats import format_stats_table, head_stats
from inspection.trace import trace_ids
from tests.conftest import CHROMIUM, biased_model, trained_tiny_run

HANGUL = re.compile("[\uac00-\ud7a3]")
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")
# Korean texts that are the technical terms themselves, as Korean explainers write them
SAME_IN_BOTH = {"role.induction", "page.layer", "page.head", "page.layer_n", "page.head_n", "page.cell",
                "page.temperature", "page.top_k", "page.top_p", "page.seed"}  # the sampling settings, named as in the CLI
# English words a Korean output may hold: the technical terms, and the names of files and settings
TERMS = {"layer", "head", "heads", "query", "key", "value", "token", "softmax", "mask", "score", "norm", "residual",
         "stream", "attention", "induction", "nats", "perplexity", "snapshot", "step", "prefill", "cache", "forward",
         "sublayer", "block", "mlp", "map", "loss", "validation", "seed", "temperature", "n_embd", "n_head", "ln_1",
         "resid", "out", "share", "inspection", "heads", "stats", "py", "heatmap", "entropy", "exp",
         "context", "gradient", "ablate"}  # "in-context loss", kept as the explainers keep it; --ablate L.H


def numbers(text: str) -> list[str]:
    return sorted(NUMBER.findall(text))


def test_every_text_has_both_languages_with_the_same_fields_and_numbers():
    assert LANGUAGES == ("en", "ko")
    for key, (en, ko) in MESSAGES.items():
        assert en.strip() and ko.strip(), key
        assert sorted(fields_of(en)) == sorted(fields_of(ko)), key
        literal = lambda text: numbers(re.sub(r"\{[^}]*\}", "", text))  # noqa: E731
        assert literal(en) == literal(ko), key
        assert HANGUL.search(ko) or key in SAME_IN_BOTH, f"{key} has no Korean"


@pytest.mark.parametrize("env, lang", [
    ({"LANG": "ko_KR.UTF-8"}, "ko"), ({"LANG": "en_US.UTF-8"}, "en"), ({"LC_ALL": "ko_KR.UTF-8", "LANG": "C"}, "ko"),
    ({"LC_ALL": "C.UTF-8", "LANG": "ko_KR.UTF-8"}, "en"), ({}, "en"), ({"LC_MESSAGES": "ko_KR", "LANG": "C"}, "ko"),
    ({"LANG": "kok_IN"}, "en"), ({"LANG": "kok_IN.UTF-8"}, "en"), ({"LANG": "ko"}, "ko"), ({"LANG": "ko.UTF-8"}, "ko"),
    ({"LANG": "KO_kr.euckr"}, "ko"), ({"LANG": "ko@latin"}, "ko"), ({"LANG": "korean"}, "en"),  # Konkani is not Korean
])  # fmt: skip
def test_the_default_language_is_the_locale_s(env, lang, monkeypatch):
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert locale_language() == lang
    assert messages()("role.mixed") == messages(lang)("role.mixed")


def test_the_korean_walkthrough_roles_and_statistics_carry_exactly_the_english_numbers():
    model = biased_model()
    trace = trace_ids(model, list(range(12)))
    labels = [f"토큰{i}" for i in range(12)]
    w_o = model.blocks[1].attn.c_proj.weight.detach().T.numpy()
    roles = measure_heads(model, np.arange(1, 64), list(range(1, 64)), eot_id=0)
    for text in (lambda lang: explain_head(trace, labels, 1, 0, 7, w_o, lang),
                 lambda lang: format_roles_table(roles, lang),
                 lambda lang: format_stats_table(head_stats(trace.att), lang)):
        en, ko = text("en"), text("ko")
        assert numbers(en) == numbers(ko) and en != ko
        assert HANGUL.search(ko) and not HANGUL.search(en.replace("토큰", ""))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return trained_tiny_run(tmp_path_factory, "messages").run


def english_words(line: str) -> set[str]:
    """The English words of a line, paths, file names and special tokens (<|endoftext|>) left out."""
    line = re.sub(r"\S*[/\\]\S*|\S+\.(json|npz|png|html|py)\b|<\|\w+\|>", " ", line)
    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z_0-9]{2,}", line) if "_" not in w}  # x_j, n_embd: symbols


def test_generate_in_korean_leaves_no_english_prose_and_keeps_the_numbers(run, tmp_path, capsys, monkeypatch):
    argv = ["--ckpt", str(run), "--prompt", "대한민국 국회는 법률을", "--explain", "1.0", "--heads", "--head", "0.1"]
    monkeypatch.setenv("LANG", "ko_KR.UTF-8")  # the locale picks Korean
    assert generate.main([*argv, "--attention", str(tmp_path / "ko")]) == 0
    ko = capsys.readouterr().out
    assert generate.main([*argv, "--attention", str(tmp_path / "en"), "--lang", "en"]) == 0
    en = capsys.readouterr().out
    for line in ko.splitlines():
        assert english_words(line) <= TERMS, line
    strip_paths = lambda text: re.sub(r"\S*/(ko|en)\b\S*", "", text)  # noqa: E731  the two output dirs differ
    assert numbers(strip_paths(ko)) == numbers(strip_paths(en)) and ko != en


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_the_page_switches_language_in_place_and_keeps_every_number(tmp_path, browser):
    model = biased_model()
    trace = trace_ids(model, list(range(10)))
    roles = measure_heads(model, np.arange(1, 64), list(range(1, 64)), eot_id=0)
    page = save_html(trace.att, [f"토큰{i}" for i in range(10)], tmp_path / "attention.html", trace=trace,
                     roles=roles)  # fmt: skip
    b = browser(page, "#layer=1&head=0&focus=6&explain=1")

    def view():
        texts = b.evaluate("""Array.from(document.querySelectorAll('[data-msg]'), e => [e.dataset.msg, e.textContent])""")
        parts = ["stats", "roles", "explain", "maps"]
        shown = {p: b.evaluate(f"document.getElementById('{p}').textContent") for p in parts}
        shown["options"] = " ".join(b.texts("#layer option") + b.texts("#head option"))
        return dict(texts), shown

    labels_en, en = view()
    assert b.evaluate("document.documentElement.lang") == "en"
    b.evaluate("""const s = document.getElementById("lang"); s.value = "ko"; s.dispatchEvent(new Event("change"))""")
    labels_ko, ko = view()
    assert b.evaluate("document.documentElement.lang") == "ko"
    assert labels_en == {k: MESSAGES[k][0] for k in labels_en} and labels_ko == {k: MESSAGES[k][1] for k in labels_ko}
    for part in en:
        assert numbers(en[part]) == numbers(ko[part]), part  # the numbers stay
        if part != "options":  # "layer 1", "head 0": the terms themselves
            assert en[part] != ko[part] and HANGUL.search(ko[part].replace("토큰", "")), part
    assert "induction" in ko["roles"] and "이전 토큰" in ko["roles"]
    assert b.problems() == ([], "")
    # a link opens the page in Korean
    b2 = browser(page, "#lang=ko&layer=1&head=0&focus=6&explain=1")
    assert b2.evaluate("document.getElementById('explain').textContent") == ko["explain"]


def test_the_pngs_speak_the_language_asked_for():
    from inspection.plot import draw_layer

    weights = trace_ids(biased_model(), list(range(6))).att
    for lang in LANGUAGES:
        say = messages(lang)
        fig = draw_layer(weights, [f"t{i}" for i in range(6)], 1, lang=lang)
        assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == (say("plot.key"), say("plot.query"))
        assert fig.get_suptitle() == say("plot.layer", layer=1) and fig.axes[-1].get_ylabel() == say("plot.weight")
