"""The glossary (inspection/glossary.py): every term once, both definitions short and present, the Korean named
Korean first and in the explainers' words (no "attention하다"), the ideas the inspection measures defined (몫,
patching, the 어절 roles, the copying circuit), README.ko.md's "용어 풀이" the module's Korean names and texts, in
its order, and no replaced form of a Korean term anywhere. No model is built.

    python -m pytest tests/test_glossary.py -q
"""

import json
import re
from pathlib import Path

from cli.messages import MESSAGES
from inspection.glossary import GLOSSARY, KOREAN_TERMS

README_KO = Path(__file__).resolve().parent.parent / "README.ko.md"
HANGUL = re.compile("[\uac00-\ud7a3]")
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
# English words a Korean definition may hold: the terms, kept as the explainers keep them, and the names of
# tensors, settings and options. Not "token": the Korean texts say 토큰, as tests/test_messages.py's do.
TERMS = {"embedding", "residual", "stream", "query", "key", "value", "score", "scores", "softmax", "mask",
         "attention", "head", "heads", "multi", "mlp", "logit", "lens", "temperature", "cache", "prefill", "forward",
         "prompt", "nat", "nats", "bit", "ln", "exp", "loss", "context", "induction", "block", "layer", "sublayer",
         "bpe", "id", "gain", "bias", "gradient", "gelu", "tied", "att", "greedy", "nucleus", "sampling", "ablate",
         "run", "model", "false", "tanh", "zero", "mode", "gpt", "why", "patch", "clean", "corrupted", "words", "in",
         "train", "py", "lens"}


def english_words(text: str) -> set[str]:
    """The English words of a text; symbols with "_" (tok_emb, W_O, d_k), <|endoftext|> and <0xNN> are names."""
    text = re.sub(r"<\|\w+\|>|<0x\w+>|\S*_\S*", " ", text)
    return {w.lower() for w in re.findall(r"[A-Za-z]+", text) if len(w) > 1}


def test_every_term_once_with_both_definitions_of_one_to_three_sentences():
    terms = [term for term, _, _, _ in GLOSSARY]
    assert len(terms) == len(set(terms)) and len({name for _, name, _, _ in GLOSSARY}) == len(GLOSSARY)
    for term, name, en, ko in GLOSSARY:
        assert term.strip() == term and term and name.strip() == name and name, term
        for text in (en, ko):
            assert text.strip() == text and text, term
            assert 1 <= len(SENTENCE_END.findall(text)) <= 3, (term, text)
        # English names Korean words only as examples: ␣'s 법률, and 어절, the word the Korean texts use
        assert HANGUL.search(ko) and not HANGUL.search(en.replace("법률", "").replace("어절", "")), term


def test_the_korean_speaks_as_the_explainers_do():
    for term, _, en, ko in GLOSSARY:
        assert "attention하" not in ko and "attention합" not in ko, term  # 보다, 참고하다, weight를 주다
        assert english_words(ko) <= TERMS, (term, english_words(ko) - TERMS)
        assert "weight" not in en.lower(), term  # in English "weights" are parameters; attention is `att`


def test_readme_ko_carries_the_glossary_in_its_order():
    lines = README_KO.read_text(encoding="utf-8").splitlines()
    start = lines.index("## 용어 풀이")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    entries = [line for line in lines[start + 1 : end] if line.startswith("- ")]
    assert entries == [f"- **{name}**: {ko}" for _, name, _, ko in GLOSSARY]


def korean_texts() -> dict[str, str]:
    """Every Korean text a learner reads: the commands' and the page's (cli/messages.py), the glossary, README.ko.md,
    the Korean docs and the Korean lesson notebook."""
    texts = {f"messages {key}": ko for key, (_, ko) in MESSAGES.items()}
    texts |= {f"glossary {term}": f"{name}: {ko}" for term, name, _, ko in GLOSSARY}
    for path in [README_KO, *sorted((README_KO.parent / "docs").glob("*.ko.md"))]:
        texts[path.name] = path.read_text(encoding="utf-8")
    for path in sorted((README_KO.parent / "notebooks").glob("*.ko.ipynb")):  # its cells, text and code
        texts[path.name] = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text(encoding="utf-8"))["cells"])
    return texts


def test_one_korean_term_per_idea_and_no_replaced_form_anywhere():
    assert len({term for _, term, _ in KOREAN_TERMS}) == len(KOREAN_TERMS)
    texts = korean_texts()
    found = [(idea, form, where) for idea, _, forms in KOREAN_TERMS for form in forms
             for where, text in texts.items() if re.search(form, text)]
    assert found == []
    # the check can fail: each replaced form is caught in a sentence that uses it
    for _, term, forms in KOREAN_TERMS:
        for form in forms:
            sample = {"의 길(?!이)": "토큰의 길", "길:": "경로 길:", "(?<!복)사본": "두 번째 사본",
                      "가능성이 (가장 )?높은": "가능성이 높은", "번째 (행|차원)": "3번째 행", "(?<!출력)층": "2층 모델",
                      "(?<![가-힣])지도(?!학습)": "attention 지도", "스냅[숏샷]": "스냅숏", "셀프 ?어텐션": "셀프 어텐션"}.get(form, form)
            assert re.search(form, sample), form
    assert not re.search("(?<!복)사본", "두 번째 복사본") and not re.search("의 길(?!이)", "텍스트의 길이")
    assert not re.search("(?<!출력)층", "lm_head(출력층)") and not re.search("(?<![가-힣])지도(?!학습)", "지도학습 페이지도")


def test_the_ideas_the_inspection_measures_are_defined_korean_first():
    """The review of 12-05: 몫 (direct, σ held, not switching off), patching (깨끗한/바꾼 텍스트, 되돌아온 비율,
    negative values), the 어절 roles and the copying circuit; every heading Korean first where the Korean texts name
    the idea in Korean."""
    by_name = {name: (en, ko) for _, name, en, ko in GLOSSARY}
    share = by_name["몫 (direct attribution)"][1]
    assert "직접" in share and "σ" in share and "--ablate" in share and "--patch" in share
    patching = by_name["patching (깨끗한 텍스트, 바꾼 텍스트)"][1]
    assert "되돌아온 비율" in patching and "음수" in patching and "(patch 후 − 바꾼 텍스트)" in patching
    roles = by_name["같은 어절 / 어절 첫 토큰 / 앞 어절 (word roles)"][1]
    assert all(f"값이 {role}" in roles for role in ("같은 어절", "어절 첫 토큰", "앞 어절"))
    assert "고르게" in by_name["어절 단위로 보기 (reading by word)"][1]
    assert "이전 토큰 head" in by_name["복사 회로 (copying circuit)"][1]
    for term, name, _, ko in GLOSSARY:  # "head 끄기 (switching a head off)", not "switching a head off"
        assert HANGUL.search(name) or name == term, name
    korean = {"switching a head off": "head 끄기", "previous-token head": "이전 토큰 head", "entropy / distance":
              "엔트로피 / 거리", "bits per character": "글자당 비트", "in-context loss drop": "in-context loss 감소"}
    assert all(name.startswith(korean[term]) for term, name, _, _ in GLOSSARY if term in korean)


def test_readme_ko_shows_the_term_table():
    text = README_KO.read_text(encoding="utf-8")
    for _, term, _ in KOREAN_TERMS:
        assert f"| {term} |" in text, term
