"""Korean words as units (inspection/views/words.py): the words of a text from its token labels, a word-level map worked
out by hand, an even spread's word map by hand, the texts that show each word's tokens and its even-spread value
beside the measured one, and the word roles' keys.

python -m pytest tests/test_words.py -q
"""

import numpy as np
import pytest
import torch

from inspection.html import page as page_html
from inspection.trace import trace_ids
from cli.messages import messages
from inspection.views import VIEWS, Settings, words as words_view
from inspection.views.words import even_spread
from inspection.labels import bytes_label
from inspection.views.words import word_key_sets, word_labels, word_maps, word_role_sums, word_spans, word_start_ids
from tests.conftest import CHROMIUM, biased_model, look_at

LABELS = ["<|endoftext|>", "␣대한", "민국", "의", "␣국회", "는"]  # three words: [0], [1, 2, 3], [4, 5]
# one head's attention, rows = query tokens
ATT = np.array([[1.0, 0, 0, 0, 0, 0],
                [0.5, 0.5, 0, 0, 0, 0],
                [0.2, 0.6, 0.2, 0, 0, 0],
                [0.1, 0.3, 0.3, 0.3, 0, 0],
                [0.4, 0.1, 0.1, 0.2, 0.2, 0],
                [0.2, 0.0, 0.0, 0.2, 0.4, 0.2]])


def test_words_begin_at_a_space_or_the_text_s_start():
    assert word_spans(LABELS) == [[0], [1, 2, 3], [4, 5]]
    assert word_spans(["␣가", "나", "↵다"]) == [[0, 1], [2]]
    assert word_spans([]) == []


def test_a_word_map_sums_over_the_key_word_and_averages_over_the_query_word_by_hand():
    # query word 1 (tokens 1, 2, 3) on key word 1: (0.5, 0.6 + 0.2, 0.3 + 0.3 + 0.3) -> mean (0.5 + 0.8 + 0.9) / 3
    # query word 2 (tokens 4, 5) on key word 0: (0.4, 0.2) -> 0.3; on word 1: (0.1 + 0.1 + 0.2, 0.2) -> 0.3;
    # on word 2: (0.2, 0.4 + 0.2) -> 0.4
    expected = np.array([[1.0, 0.0, 0.0],
                         [(0.5 + 0.2 + 0.1) / 3, (0.5 + 0.8 + 0.9) / 3, 0.0],
                         [0.3, 0.3, 0.4]])
    got = word_maps(ATT[None, None], word_spans(LABELS))[0, 0]
    np.testing.assert_allclose(got, expected, atol=1e-12)
    np.testing.assert_allclose(got.sum(-1), 1.0)


def test_an_even_spread_gives_a_word_its_share_of_the_keys_each_query_token_sees_by_hand():
    # query word 1 (tokens 1, 2, 3, seeing 2, 3 and 4 keys) on key word 1: (1/2, 2/3, 3/4) -> mean; on word 0:
    # (1/2, 1/3, 1/4); query word 2 (tokens 4, 5, seeing 5 and 6 keys) on word 1: (3/5, 3/6), on word 2: (1/5, 2/6)
    expected = np.array([[1.0, 0.0, 0.0],
                         [(1 / 2 + 1 / 3 + 1 / 4) / 3, (1 / 2 + 2 / 3 + 3 / 4) / 3, 0.0],
                         [(1 / 5 + 1 / 6) / 2, (3 / 5 + 3 / 6) / 2, (1 / 5 + 2 / 6) / 2]])
    np.testing.assert_allclose(even_spread(word_spans(LABELS)), expected, atol=1e-12)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_word_views_print_each_word_s_tokens_and_its_even_spread_value_beside_the_measured_one(lang):
    from types import SimpleNamespace

    from inspection.views import Look
    from inspection.views.words import label_bytes

    say, words = messages(lang), word_spans(LABELS)
    T = len(LABELS)
    run = SimpleNamespace(token_bytes=[label_bytes(label) for label in LABELS])  # token i is LABELS[i]
    att = np.stack([ATT, ATT])[:, None]  # (2, 1, T, T): head 1.0 is ATT
    look = Look(run, list(range(T)), LABELS, None, att, None, 4, str)

    def text(**settings):
        return words_view.text(words_view.record(look, Settings(**settings)), lang)

    # token 4 (␣국회) sees keys 0..4: word 0 gets 0.4 (even 1/5), word 1 0.1 + 0.1 + 0.2 (even 3/5), word 2 0.2 (1/5)
    line = text(explain=(1, 0), query=4)
    assert line == say("words.sums", sums=", ".join([
        say("words.value", word="<|endoftext|>", value="0.4000", n=1, even="0.2000"),
        say("words.value", word="␣대한민국의", value="0.4000", n=3, even="0.6000"),
        say("words.value", word="␣국회는", value="0.2000", n=2, even="0.2000")]))
    table = text(head=(1, 0)).splitlines()
    assert table[0] == say("words.top", layer=1, head=0) and len(table) == 1 + len(words)
    # query word 1's strongest is word 1 itself: (0.5 + 0.8 + 0.9) / 3 = 0.733, even (1/2 + 2/3 + 3/4) / 3 = 0.639
    assert say("words.value", word="␣대한민국의(1)", value="0.733", n=3, even="0.639") in table[2]


def test_the_word_roles_look_at_the_keys_their_names_say_the_previous_token_left_to_its_own_role():
    starts = torch.tensor([[True, True, False, False, True, False]])
    keys = {role: k[0].nonzero().tolist() for role, k in word_key_sets(starts).items()}
    assert keys["same-word"] == [[3, 1]]  # token 3's own word begins at 1; token 2's only earlier one is its previous
    assert keys["word-start"] == [[3, 1]]
    assert keys["previous-word"] == [[4, 1], [4, 2], [5, 1], [5, 2], [5, 3]]  # word 3's tokens on word 2, not q - 1
    sums = word_role_sums(torch.tensor(ATT)[None, None, None], starts)
    total, n = sums["same-word"]
    assert n == 1 and abs(float(total[0, 0]) - 0.3) < 1e-12  # token 3 puts 0.3 on token 1
    total, n = sums["previous-word"]  # token 4: 0.1 + 0.1 on tokens 1, 2; token 5: 0.0 + 0.0 + 0.2 on 1, 2, 3
    assert n == 2 and abs(float(total[0, 0]) / n - (0.2 + 0.2) / 2) < 1e-12


SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]  # every Unicode whitespace character (29)


def space_forms(ch: str) -> dict[str, list[str]]:
    """The labels of "대한{ch}민국" as a tokenizer may split it: the space a token of its own, or the first of the next
    word's; as a character, or (outside the vocabulary) as byte pieces."""
    char, pieces = bytes_label(ch.encode()), [f"<0x{b:02X}>" for b in ch.encode()]
    return {"own token": ["대한", char, "민국"], "word's first": ["대한", char + "민국"],
            "bytes": ["대한", *pieces, "민국"], "bytes, then the word": ["대한", *pieces[:-1], pieces[-1] + "민", "국"]}


FORMS = [(ch, form) for ch in SPACES for form in space_forms(ch)]


@pytest.mark.parametrize("ch, form", FORMS, ids=[f"U+{ord(ch):04X} {form}" for ch, form in FORMS])
def test_every_unicode_space_separates_words_as_a_newline_does(ch, form):
    # 29 whitespace characters x 4 ways to tokenize them (116 cases): two words, the second beginning at the space
    labels = space_forms(ch)[form]
    words = word_spans(labels)
    assert words == [[0], list(range(1, len(labels)))], labels
    assert word_labels(labels, words) == ["대한", bytes_label((ch + "민국").encode())]


@pytest.mark.parametrize("labels", [["대한", "민국"], ["대한", "<0xEB>", "<0xAF>", "<0xBC>", "국"], ["대", "<U+200B>", "한"],
                                    ["가", "<0x85>"]])  # a zero-width space and a lone byte are no spaces
def test_no_other_character_separates_words(labels):
    assert word_spans(labels) == [list(range(len(labels)))]


def test_a_word_whose_syllable_fell_back_to_bytes_is_labelled_whole():
    labels = ["<|endoftext|>", "대한민국의", "␣수도는", "␣서", "<0xEC>", "<0x9A>", "<0xB8>", "이다"]
    words = word_spans(labels)
    assert word_labels(labels, words) == ["<|endoftext|>", "대한민국의", "␣수도는", "␣서울이다"]
    # a word cut short inside a character keeps the stray bytes visible
    assert word_labels(["␣서", "<0xEC>", "<0x9A>"], [[0, 1, 2]]) == ["␣서<0xEC><0x9A>"]


def test_a_token_begins_a_word_by_its_bytes():
    starts = word_start_ids([b" a", b"\n", b"\t\xea", "\u3000".encode(), b"\xe3", b"a", b"\x80"])
    assert starts.tolist() == [True, True, True, True, False, False, False]


def test_the_first_word_is_the_end_of_text_token_alone():
    assert word_spans(["<|endoftext|>", "대한", "민국", "␣국회"]) == [[0], [1, 2], [3]]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_s_switch_reads_the_maps_by_word_in_both_languages(tmp_path, browser):
    """The switch swaps the token line for the words and every map for Python's word-level one; off again, the
    tokens come back; the hint says what is summed and averaged, in the language shown."""
    model = biased_model(2)
    ids = [0, 5, 17, 3, 42, 18, 9]
    labels = ["<|endoftext|>", "대한", "민국", "␣국회", "는", "␣법률", "을"]
    trace = trace_ids(model, ids)
    words = word_spans(labels)
    look = look_at(model, ids, labels)
    records = {name: VIEWS[name].record(look, Settings()) for name in ("maps", "words")}
    (tmp_path / "attention.html").write_text(page_html(records), encoding="utf-8")
    page = browser(tmp_path / "attention.html", "#layer=1&head=0&lang=ko")
    assert page.evaluate("document.getElementById('words-switch').hidden") is False
    page.evaluate("{ const w = document.getElementById('words'); w.checked = true; w.dispatchEvent(new Event('change')) }")
    assert page.texts("#tokens .t") == ["<|endoftext|>", "대한민국", "␣국회는", "␣법률을"]
    shown = np.array([float(w) for w in page.texts("#outgoing .w")])  # head 1.0, the last word's row
    by_word = word_maps(trace.att, words)[1, 0, -1]
    np.testing.assert_allclose(shown, by_word, atol=6e-4)
    titles = page.evaluate("Array.from(document.querySelectorAll('#outgoing .tok'), b => b.title)")
    even = even_spread(words)[-1]  # a word's tokens and its even-spread value on hover, Python's numbers
    assert titles == [messages("ko")("page.word_title", i=k, token=page.texts("#tokens .t")[k], n=len(words[k]),
                                     value=f"{by_word[k]:.3f}", even=f"{even[k]:.3f}") for k in range(len(words))]
    assert "key 어절의 토큰들" in page.texts("#words-hint")[0] and page.texts("#explain") == [""]
    page.evaluate("const s = document.getElementById('lang'); s.value = 'en'; s.dispatchEvent(new Event('change'))")
    assert "summed over the key word's tokens" in page.texts("#words-hint")[0]
    assert page.texts("#tokens .t") == ["<|endoftext|>", "대한민국", "␣국회는", "␣법률을"]  # still by word
    page.evaluate("{ const w = document.getElementById('words'); w.checked = false; w.dispatchEvent(new Event('change')) }")
    assert page.texts("#tokens .t") == labels
    assert page.problems() == ([], "")


def test_a_word_cut_between_jamo_tokens_reads_as_its_syllables():
    """data.unit = "jamo": a syllable split across tokens (labels "␣ㄸ-", "-ㅗㅁ방") is whole in its word's label, made from
    the tokens' bytes."""
    import unicodedata

    pieces = [unicodedata.normalize("NFD", " 또")[:2].encode(), unicodedata.normalize("NFD", "똠방").encode()[3:]]
    assert b"".join(pieces).decode() == unicodedata.normalize("NFD", " 똠방")
    assert word_labels(["␣ㄸ-", "-ㅗㅁ방"], [[0, 1]], pieces) == ["␣똠방"]
