"""The teaching texts in two languages (cli/messages.py): the table is whole, the Korean texts carry the
English ones' numbers, generate.py speaks the language asked for (or the locale's), and the page switches in place.

    python -m pytest tests/test_messages.py -q
"""

import re
import string

import numpy as np
import pytest

import data.prepare
import generate
import train
from inspection.html import page as page_html
from inspection.views import VIEWS, Settings
from inspection.views.roles import format_roles_table, measure_heads, roles_record
from cli.messages import LANGUAGES, MESSAGES, fields_of, locale_language, messages
from inspection.views.maps import format_stats_table, head_stats
from inspection.trace import trace_ids
from tests.conftest import CHROMIUM, TINY, biased_model, look_at, trained_tiny_run

HANGUL = re.compile("[\uac00-\ud7a3]")
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")
# Korean texts that are the technical terms themselves, as Korean explainers write them
SAME_IN_BOTH = {"role.induction", "page.layer", "page.head", "page.layer_n", "page.head_n", "page.cell",
                "page.temperature", "page.top_k", "page.top_p", "page.seed",  # the sampling settings, named as in the CLI
                "cut.prompt", "train.where_best", "train.auto",  # "prompt", "best/ (step N)", "auto: ...": terms, names
                "plots.step", "plots.at"}  # a figure's "step", and "1.0 at 200" as "1.0 (step 200)"
# English words a Korean output may hold: the technical terms, and the names of files and settings
TERMS = {"layer", "head", "heads", "query", "key", "value", "token", "softmax", "mask", "score", "norm", "residual",
         "stream", "attention", "induction", "nats", "perplexity", "snapshot", "step", "prefill", "cache", "forward",
         "sublayer", "block", "mlp", "map", "loss", "validation", "seed", "temperature", "n_embd", "n_head", "ln_1",
         "resid", "out", "share", "inspection", "heads", "stats", "py", "heatmap", "entropy", "exp",
         "context", "gradient", "ablate", "projection", "gpt"}  # GPT-2, a model by name  # "in-context loss", kept as the explainers keep it; --ablate L.H


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
    look = look_at(model, list(range(12)), [f"토큰{i}" for i in range(12)], 7)
    walk = VIEWS["walkthrough"].record(look, Settings(explain=(1, 0), query=7))
    roles = measure_heads(model, np.arange(1, 64), list(range(1, 64)), eot_id=0)
    for text in (lambda lang: VIEWS["walkthrough"].text(walk, lang),
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


def test_the_lines_said_on_the_way_follow_the_command_s_lang(run, tmp_path, capsys, data_cache):
    """--lang is set once where a command starts; the functions below it that warn as they compute (a prompt cut to
    the context, training's set-up, the prepared data's report) take no language, and still say their lines in it."""
    long = "대한민국 국회는 법률을 만든다. " * 20
    for lang, cut in (("ko", "개만 씁니다"), ("en", "using the last")):
        assert generate.main(["--ckpt", str(run), "--prompt", long, "--max-new-tokens", "0", "--lang", lang]) == 0
        assert cut in capsys.readouterr().err
    argv = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=1", "--train.eval_interval=1"]
    for lang, summary in (("ko", "step당 토큰"), ("en", "tokens/step")):
        assert train.main([*argv, "--out", str(tmp_path / lang), "--lang", lang]) == 0
        assert summary in capsys.readouterr().out
    for lang, tokenizer in (("ko", "토크나이저: 어휘 크기"), ("en", "tokenizer: vocab size")):  # python -m data.prepare
        assert data.prepare.main([*argv[:2], f"--data.cache_dir={data_cache}", "--lang", lang]) == 0
        assert tokenizer in capsys.readouterr().out


# Beyond TERMS, the words a Korean line may hold as names: units, precisions, devices, the run's directories
NAMES = {"bits", "char", "bpc", "cpu", "cuda", "fp32", "bf16", "fp16", "compile", "off", "best", "last", "auto", "lr",
         "tok", "mfu", "tokens", "ablate", "mode", "zero", "mean", "top", "lens", "explain", "path", "python",
         "generate", "ckpt", "train", "max_steps", "seed", "resume", "overwrite", "id", "pos", "tok_emb", "pos_emb",
         "gelu", "mlp", "logit", "logits", "ln_f", "lm_head", "sampling", "nucleus", "repetition", "penalty", "hidden",
         "unit", "prompt", "context", "projection", "merge", "sliding", "window", "greedy", "end", "text"}


def english_prose(line: str) -> bool:
    """Whether a printed line reads as English prose: it has no Hangul, and once names are left out (paths, options,
    settings as key=value or a.b, symbols with "_", numbers, <|endoftext|>), three or more English words that are
    neither TERMS nor NAMES remain. A Korean line keeps its technical terms in English; a line of names (the
    settings train.py lists as key=value, a progress bar) is no prose."""
    if HANGUL.search(line):
        return False
    line = re.sub(r"\S*[/\\=]\S*|--\S+|\S+\.\S+|\S*_\S*|<\|\w+\|>|\d\S*", " ", line)
    words = [w.lower() for w in re.findall(r"[A-Za-z]{2,}", line)]
    return len([w for w in words if w not in TERMS | NAMES]) >= 3


def test_the_prose_finder_tells_english_from_korean_with_terms_and_from_lists_of_names():
    assert english_prose("warning: the prompt has 36 tokens, more than the model's context of 16; using the last 16")
    assert english_prose("stopped the live inspector")
    assert not english_prose("경고: prompt의 토큰이 36개로 모델의 context 16개보다 많아, 마지막 16개만 씁니다")
    assert not english_prose("[train] max_steps=20 time_budget='' batch_size=4 lr=0.003 device='cpu' compile='off'")
    assert not english_prose(" 40%|████      | 4/10 [00:01<00:03,  1.96it/s, loss=6.8883, lr=3.00e-03, tok_s=100]")
    assert not english_prose("   1     1    0  induction 1.000       0.156")


def command_lines(main, argv, capsys) -> list[str]:
    """Every line (stdout and stderr) a command prints, run in this process; it must succeed."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [line for text in (out, err) for chunk in text.splitlines() for line in chunk.split("\r") if line.strip()]


@pytest.mark.slow
def test_every_command_under_korean_prints_no_english_prose(tmp_path, capsys, monkeypatch, data_cache):
    """train.py and generate.py, each of their teaching and warning lines, in Korean (a Korean locale, as a
    learner's machine has it): the notes on settings, the data lines, the evaluation, the early stop, the closing
    bits/char and heads lines, generation, samples, the cut prompt, the --top-k note, scoring, switched-off heads,
    the maps, the walkthrough, the path, the roles, the lens and the over-training page."""
    import train

    monkeypatch.setenv("LANG", "ko_KR.UTF-8")
    run, lines = tmp_path / "run", []
    base = ["--config", "configs/tiny.toml", f"--data.cache_dir={data_cache}", "--train.threads=1"]
    lines += command_lines(train.main, [*base, "--out", run, "--train.snapshots=2", "--train.warmup_steps=50",
                                        "--train.copy_lessons=0.5", "--train.lr=auto"], capsys)  # a note, auto, lesson
    lines += command_lines(train.main, [*base, "--out", tmp_path / "flat", "--train.lr=0", "--train.min_lr=0",
                                        "--train.patience=1", "--train.eval_interval=5"], capsys)  # an early stop
    assert any(line.startswith("조기 종료:") for line in lines) and any(line.startswith("참고:") for line in lines)
    text = tmp_path / "text.txt"
    text.write_text("대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.", encoding="utf-8")
    prompt, long_prompt = "대한민국 국회는", "대한민국 국회는 법률을 제정한다. " * 6
    for argv in (["--prompt", prompt, "--max-new-tokens", 8, "--seed", 0],
                 ["--prompt", prompt, "--max-new-tokens", 4, "--num-samples", 2, "--seed", 1],
                 ["--prompt", long_prompt, "--max-new-tokens", 2, "--top-k", 5000],
                 ["--score", text], ["--score", text, "--ablate", "1.0"],
                 ["--prompt", prompt, "--attention", tmp_path / "a", "--head", "0.1", "--explain", "1.0"],
                 ["--prompt", prompt, "--explain", "path", "--repetition-penalty", 1.3],
                 ["--heads"], ["--prompt", prompt, "--lens", "--ablate", "0.1"],
                 ["--prompt", prompt, "--why"], ["--prompt", prompt, "--words", "--head", "0.1", "--explain", "0.1"],
                 ["--prompt", prompt, "--attention", tmp_path / "o", "--over-training", run]):
        lines += command_lines(generate.main, (["--ckpt", run] if "--over-training" not in argv else []) + argv, capsys)
    assert any(line.startswith("경고: prompt의 토큰이") for line in lines)
    from inspection.views import patch as patching

    monkeypatch.setattr(patching, "MIN_GAP", 1e-9)  # this tiny run predicts nearly alike after any two texts
    from inference.runs import load_run

    loaded = load_run(run, device="cpu")
    clean, corrupt = next((a, b) for a, b in (("국회는 법률을", "국회는 법률로"), ("국회는 법률을", "정부는 법률을"),
                                              ("대한민국 국회", "대한민국 정부"), ("법률을", "법률로"))
                          if len(loaded.encode_prompt(a)) == len(loaded.encode_prompt(b)))
    lines += command_lines(generate.main, ["--ckpt", run, "--prompt", clean, "--patch", corrupt], capsys)
    assert [line for line in lines if english_prose(line)] == []


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_the_page_switches_language_in_place_and_keeps_every_number(tmp_path, browser):
    model = biased_model()
    look = look_at(model, list(range(10)), [f"토큰{i}" for i in range(10)])
    records = {name: VIEWS[name].record(look, Settings()) for name in ("maps", "walkthrough")}
    records["roles"] = roles_record(measure_heads(model, np.arange(1, 64), list(range(1, 64)), eot_id=0))
    page = tmp_path / "attention.html"
    page.write_text(page_html(records), encoding="utf-8")
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


@pytest.mark.parametrize("lang", ["fr", "EN", "kr", "ko_KR"])
def test_a_language_that_is_not_one_is_refused_in_one_line_that_names_the_argument(lang):
    # every text of every view goes through messages(): a notebook's lang="fr" ended in "tuple.index(x): x not in tuple"
    import torch

    from inspection.views.maps import format_stats_table, head_stats
    from cli.errors import UserError

    with pytest.raises(UserError, match=rf"^lang = '{lang}' is not one of 'en', 'ko'$"):
        messages(lang)
    with pytest.raises(UserError, match="lang = "):
        format_stats_table(head_stats(torch.softmax(torch.randn(1, 2, 3, 3), -1)), lang=lang)


# ---- Korean particles after values ----------------------------------------------------------------------------
# the particles whose form follows the last sound of the word before them (은/는, 이/가, 을/를, 과/와, (으)로, and the
# copula's 이라/라 and 이나/나), each as it would stand after a value: then a space, punctuation or the end
SOUND_PARTICLE = re.compile(r"(?:은|는|이|가|을|를|과|와|으로|로|이라|라|이나|나)(?![가-힣])")
# a value's end in a template: a field, then perhaps a closing quote and a bracket that the particle would skip
AFTER_FIELD = re.compile(r"\}['\"’”]?(?:\([^()]*\))?")


def fixed_particles(text: str) -> list[str]:
    """The places in a template where a fixed particle follows a {field} (directly, or after a quote or a
    parenthesis, which a reader skips to find the word the particle attaches to)."""
    found = []
    for end in AFTER_FIELD.finditer(text):
        if SOUND_PARTICLE.match(text, end.end()):
            found.append(text[max(0, end.start() - 20) : end.end() + 3])
    return found


def test_the_particle_finder_catches_a_fixed_particle_after_a_value_and_nothing_else():
    assert fixed_particles("토큰 {i} {token}(id {id}, 전체 {T}개 중)이 다음 토큰까지")  # 12-05 item 15
    assert fixed_particles("(ln_f의 scale σ = {sigma}는 계산된 값 그대로)") and fixed_particles("head {heads}을(를) 끈")
    assert fixed_particles("'{token}'이 나옵니다") and fixed_particles("{x}로 나눕니다")
    assert not fixed_particles("토큰 {n}개, 글자 {chars}개") and not fixed_particles("{path}에 저장했습니다")
    assert not fixed_particles("이 head({layer}.{head})는 꺼져 있습니다")  # the particle follows "head", not the value
    assert not fixed_particles("{versus}보다 {token}인가") and not fixed_particles("head {heads:을} 끈")


def test_no_korean_text_glues_a_fixed_particle_to_a_value():
    """Every Korean text: no {field} followed by a particle whose form depends on the value's last sound; such a
    particle is named in the field ({heads:을}) and chosen from the value. The page fills plain {name}s, so its
    texts turn the sentence instead."""
    from cli.messages import PARTICLES, page_messages

    glued = {key: found for key, (_, ko) in MESSAGES.items() if (found := fixed_particles(ko))}
    assert glued == {}
    named = {key for key, (_, ko) in MESSAGES.items() if any(spec in PARTICLES for _, _, spec, _ in
                                                              string.Formatter().parse(ko) if spec)}
    assert named and not named & set(page_messages()), named & set(page_messages())


@pytest.mark.parametrize("value, which, expected", [
    ("'한다'", "이", "'한다'가"), ("'법률'", "이", "'법률'이"), ("0.6456", "은", "0.6456은"),  # 육
    ("0.1", "을", "0.1을"), ("1.2", "을", "1.2를"), ("0.2,1.3", "을", "0.2,1.3을"), ("1.0", "을", "1.0을"),  # 영
    ("10", "이", "10이"), ("100", "을", "100을"), ("1,000", "과", "1,000과"), ("20000", "은", "20000은"),  # 십 백 천 만
    ("100000000", "이", "100000000이"), ("2", "으로", "2로"), ("7", "으로", "7로"), ("3", "으로", "3으로"),  # 억; ㄹ
    ("서울", "으로", "서울로"), ("집", "으로", "집으로"), ("MLP", "이", "MLP가"), ("ln", "을", "ln을"),  # 피, 엔
    ("12%", "이", "12%가"), ("'한다'(id 816)", "이", "'한다'(id 816)가"), ("?!", "을", "?!을(를)"),
])  # fmt: skip
def test_the_particle_follows_the_value_s_last_sound_as_korean_reads_it(value, which, expected):
    from cli.messages import FORMATTER, particle

    assert value + particle(value, which) == expected
    assert FORMATTER.format("{v:" + which + "}", v=value) == expected


def test_every_korean_text_takes_sample_values_and_its_named_particles_fit_them():
    """Every text formats with sample values (a word ending on a consonant, then on a vowel), and where a field
    names its particle the rendered text carries the form that fits: 법률을, 한다를."""
    from cli.messages import PARTICLES

    say = messages("ko")
    for key, (_, ko) in MESSAGES.items():
        specs = {name: spec for _, name, spec, _ in string.Formatter().parse(ko) if name}
        for word in ("법률", "한다"):
            text = say(key, **{name: word for name in specs})
            for name, spec in specs.items():
                if spec in PARTICLES:
                    after = PARTICLES[spec][0 if word == "법률" else 1]
                    assert word + after in text, (key, text)


# ---- what a measure is, said wherever it is shown ------------------------------------------------------------
# --why's shares are direct: what a part writes straight into the last stream, σ held; effects through later layers
# are the later parts'; switching off (--ablate) and patching (--patch) measure effects
CAVEAT = {"en": ("straight into the last stream", "later layers", "σ", "not the effect of switching the part off",
                 "--ablate", "--patch"),
          "ko": ("직접 더한 값만", "뒤 layer", "σ", "껐을 때의 효과가 아닙니다", "--ablate", "--patch")}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_view_of_the_shares_says_they_are_direct_and_not_the_effect_of_switching_off(lang):
    """The caveat is in why.exact, and every text that shows shares carries why.exact or says "directly" itself:
    the terminal's and the notebook's table (inspection/views/why.py's text) and the page's panel (tests/test_why.py
    sees it in Chromium); the patching texts say which run's piece goes where, the gap and the negative values."""
    from inspection.views import Settings, why

    say = messages(lang)
    assert all(part in say("why.exact") for part in CAVEAT[lang]), say("why.exact")
    direct = "direct" if lang == "en" else "직접"  # "directly", "direct share"
    for key in ("why.title", "page.why_title"):
        assert direct in MESSAGES[key][LANGUAGES.index(lang)], key
    assert "σ" in say("page.why_for", i=0, token="a", versus="b", diff="1", sigma="0.5")
    model = biased_model()
    table = why.text(why.record(look_at(model, list(range(8))), Settings()), lang)
    assert say("why.exact") in table.splitlines() and direct in table.splitlines()[0]
    patch = say("patch.title", token="a", versus="b", clean="1", corrupt="0")
    gap = ("(patched − corrupted) / (clean − corrupted)", "negative =") if lang == "en" else (
        "(patch 후 − 바꾼 텍스트) / (깨끗한 텍스트 − 바꾼 텍스트)", "음수 =")
    assert all(part in patch for part in gap), patch


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_word_texts_say_a_word_s_value_grows_with_its_tokens(lang):
    """words.top, page.words_hint and the word PNG's title say that a word's value sums its tokens; words.sums and
    the page's word hover carry each word's tokens and its even-spread value (tests/test_words.py checks the
    numbers)."""
    say = messages(lang)
    for key in ("words.top", "page.words_hint"):
        text = MESSAGES[key][LANGUAGES.index(lang)]
        assert ("4 times a word of 1" if lang == "en" else "1개인 어절의 4배") in text, key
    assert {"n", "even"} <= set(fields_of(MESSAGES["words.value"][0])) and {"n", "even"} <= set(
        fields_of(MESSAGES["page.word_title"][0]))
    assert ("sum" if lang == "en" else "합") in say("plot.layer_words", layer=0)
