"""The terms a learner meets in the inspection tools, each named and defined in English and in Korean: the attention
page shows them, and README.ko.md's "용어 풀이" carries the Korean names and texts word for word (tests/test_glossary.py
checks)."""

# (term, its Korean name, English definition, Korean definition), in the order a forward pass meets them, then what
# the inspection measures, decoding and loss. The Korean name is the term the Korean texts use, first, with the
# English in brackets where they differ; a term Korean explainers keep in English (query, head, softmax) stays so.
# The English names the project's tensors; "weights" means parameters only (the post-softmax tensor is `att`).
# The Korean keeps the terms in English as Korean explainers of self-attention do, in 합니다체.
GLOSSARY: list[tuple[str, str, str, str]] = [
    ("token", "토큰 (token)",
     "The unit the model reads and writes: a piece of text cut by the BPE tokenizer, often a whole Korean syllable "
     "or word, or one raw byte (<0xNN>) of a character the vocabulary lacks. The model predicts each next token "
     "from the tokens before it.",
     "모델이 읽고 쓰는 단위입니다. BPE 토크나이저가 텍스트를 자른 조각으로, 한국어에서는 음절 하나나 단어 하나가 토큰이 "
     "되는 경우가 많고, 어휘에 없는 글자는 바이트(<0xNN>) 단위로 나뉩니다. 모델은 앞의 토큰들을 보고 다음 토큰을 "
     "예측합니다."),
    ("␣", "␣",
     "The word-start mark in token labels: a token that begins with a space shows it as ␣, so ␣법률 is 법률 at the "
     "start of a word (어절, a unit between spaces), and 법률 without it continues the word before. A newline shows as "
     "↵.",
     "토큰 라벨에서 어절(띄어쓰기 단위)의 시작을 나타내는 표시입니다. 공백으로 시작하는 토큰은 그 공백을 ␣로 보여 "
     "주므로, ␣법률은 어절 첫머리의 법률이고 ␣ 없는 법률은 앞 글자에 붙어 어절을 이어 가는 조각입니다. 줄바꿈은 ↵로 "
     "보입니다."),
    ("jamo token", "자모 토큰",
     "With data.unit = \"jamo\" BPE starts from the letters of each Hangul syllable (initial consonant, vowel, final "
     "consonant) instead of whole syllables, and learns syllables and longer pieces as its merges. A label shows "
     "the syllables a token holds whole; the letters of a syllable it holds only part of show as ㄱ, ㅏ with a "
     "hyphen on the side where the rest of that syllable is: -ㄴ is a final consonant whose syllable began in the "
     "token before, ㄱ- an initial consonant whose vowel comes in the next token.",
     "자모 단위 run에서는 BPE가 음절 대신 음절을 이루는 초성, 중성, 종성에서 시작해, 음절과 더 긴 조각을 합쳐 가며 "
     "배웁니다. 토큰 라벨은 토큰이 통째로 가진 음절은 음절로 보여 주고, 일부만 가진 음절의 자모는 ㄱ, ㅏ 같은 글자로 "
     "쓰되 그 음절의 나머지가 있는 쪽에 하이픈을 붙입니다: -ㄴ은 앞 토큰에서 시작한 음절의 종성이고, ㄱ-은 중성이 다음 "
     "토큰에 오는 초성입니다."),
    ("token id / embedding", "토큰 id / embedding",
     "The tokenizer gives every token an integer id. Its embedding is row id of tok_emb (vocab_size x n_embd), a "
     "learned vector of n_embd numbers; lm_head, which turns the last residual stream into logits, shares that "
     "matrix (tied).",
     "토크나이저는 토큰마다 정수 id를 붙입니다. 토큰 embedding은 tok_emb 행렬(vocab_size x n_embd)의 id번 행, 즉 "
     "학습되는 n_embd차원 벡터입니다. 마지막 residual stream에서 logit을 계산하는 lm_head도 같은 행렬을 씁니다(tied)."),
    ("position embedding", "위치 embedding (position embedding)",
     "Row t of pos_emb (block_size x n_embd): a learned vector for position t, added to the token embedding, so "
     "the same token at another place looks different to the model. Positions stop at block_size, the longest "
     "context.",
     "pos_emb 행렬(block_size x n_embd)의 t번 행으로, 위치 t마다 학습되는 벡터입니다. 토큰 embedding에 더해지므로 "
     "모델은 같은 토큰이라도 어디에 있는지 구별할 수 있습니다. 위치는 block_size까지만 있어서 context도 그보다 길 수 "
     "없습니다."),
    ("residual stream", "residual stream",
     "The vector of n_embd numbers each token carries through the model: it starts as token + position embedding, "
     "and every sublayer adds its output to it (x + attn(ln_1(x)), then x + mlp(ln_2(x))). Heads and MLPs pass "
     "information on only by writing to it and reading from it.",
     "각 토큰이 모델을 지나는 동안 들고 다니는 n_embd차원 벡터입니다. 토큰 embedding과 위치 embedding의 합에서 시작해, "
     "sublayer마다 자기 출력을 더해 갑니다(x + attn(ln_1(x)), 그다음 x + mlp(ln_2(x))). head와 MLP는 residual "
     "stream에 쓰고 거기서 읽는 방식으로만 정보를 주고받습니다."),
    ("LayerNorm", "LayerNorm",
     "Rescales a vector to mean 0 and variance 1, then applies a learned gain and bias. Each block hands its "
     "attention (ln_1) and its MLP (ln_2) a normalised copy of the residual stream, which itself is left as it is; "
     "ln_f normalises the last stream once more before the logits.",
     "벡터를 평균 0, 분산 1로 맞춘 뒤 학습된 gain과 bias를 적용합니다. block마다 residual stream의 복사본을 정규화해 "
     "attention(ln_1)과 MLP(ln_2)에 넘기고, stream 자체는 그대로 둡니다. logit을 계산하기 전에는 마지막 stream을 ln_f로 "
     "한 번 더 정규화합니다."),
    ("query / key / value", "query / key / value",
     "Three projections a head makes of the same normalised input x, by three matrices (c_attn: x W_Q, x W_K, "
     "x W_V). The query is what this token looks for, the key the label a token is matched by, the value what it "
     "actually hands over: q·k decides where to look, and v is what is carried from there.",
     "head가 같은 정규화된 입력 x에 서로 다른 세 행렬을 곱해 만드는 세 projection입니다(c_attn: x W_Q, x W_K, x W_V). "
     "query는 이 토큰이 무엇을 찾는지, key는 토큰이 내건 이름표, value는 그 토큰이 실제로 넘겨주는 내용입니다. "
     "어디를 볼지는 query와 key(q·k)가 정하고, 거기서 무엇을 가져올지는 value가 정합니다."),
    ("score / √d_k", "score / √d_k",
     "The score of query i for key j is the dot product q·k_j divided by √d_k (the tensor scores, before the mask), "
     "where d_k = n_embd / n_head is a head's width. If the components of q and k have variance 1, q·k_j has "
     "variance d_k, and the division keeps the scores' variance near 1. Without it the scores spread wider as d_k "
     "grows, the softmax piles everything on one key and its gradients vanish.",
     "query i가 key j에 매기는 score는 내적 q·k_j를 √d_k로 나눈 값이고(mask 전의 scores 텐서), d_k = n_embd / n_head는 "
     "head 하나의 차원 수입니다. q와 k의 성분이 분산 1이면 q·k_j의 분산은 d_k이므로, √d_k로 나누면 score의 분산이 약 "
     "1로 유지됩니다. 나누지 않으면 d_k가 클수록 score가 넓게 퍼져 softmax가 key 하나에 쏠리고, gradient가 거의 "
     "사라집니다."),
    ("causal mask", "causal mask",
     "A query may see only its own position and the ones before it: the score of every later key becomes −∞ "
     "before the softmax. Since exp(−∞) = 0, those keys get an attention of 0, and the allowed ones still sum to 1.",
     "query는 자기 위치와 그 앞의 key만 볼 수 있으므로, softmax 전에 뒤에 있는 key의 score를 −∞로 바꿉니다. "
     "exp(−∞) = 0이라서 mask된 key의 attention은 0이 되고, 나머지의 합은 그대로 1입니다."),
    ("softmax", "softmax",
     "Turns a row of scores s into positive numbers that sum to 1: w_j = exp(s_j) / Σ exp(s). A larger score gets "
     "more, but every key the query may see gets some.",
     "한 행의 score s를 합이 1인 양수들로 바꿉니다: w_j = exp(s_j) / Σ exp(s). score가 클수록 큰 몫을 받지만, "
     "query가 볼 수 있는 key는 모두 조금씩이라도 받습니다."),
    ("attention", "attention (attention 값)",
     "The post-softmax numbers a query gives the keys: the tensor att (rows = queries, columns = keys), each row "
     "summing to 1, so a text of T tokens makes T x T of them per head, and twice the text costs about four times "
     "the work and memory. A head's output y = Σ_j w_j v_j mixes every value in those proportions, not only the "
     "strongest one. Where a head looks is a hint, not a causal explanation: switching the head off (--ablate) is "
     "the test.",
     "softmax 뒤에 query가 각 key에 주는 값으로, 코드의 att 텐서(행 = query, 열 = key)이며 각 행의 합은 1입니다. 토큰 "
     "T개인 텍스트는 head마다 T x T개의 값을 만들므로, 텍스트가 두 배면 계산과 메모리는 약 네 배가 됩니다. head의 출력 "
     "y = Σ_j w_j v_j는 값이 가장 큰 key의 value를 베낀 것이 아니라 모든 value를 그 비율대로 섞은 것이고, head가 "
     "어디를 보는지는 단서일 뿐 원인에 대한 설명이 아니므로 확인하려면 --ablate로 그 head를 꺼 봐야 합니다."),
    ("head / multi-head / W_O", "head / multi-head / W_O",
     "A head is one attention of width d_k with its own columns of c_attn (W_Q, W_K, W_V); a block runs n_head of "
     "them side by side, so together they can attend to several relations at once. Their outputs y are concatenated and multiplied by W_O "
     "(c_proj), which mixes the heads, and the result is added to the residual stream.",
     "head는 c_attn 중 자기 몫의 열(W_Q, W_K, W_V)로 d_k차원에서 따로 계산하는 attention 하나입니다. block 하나에서 "
     "head n_head개가 나란히 계산되므로 여러 관계를 동시에 볼 수 있습니다(multi-head). 각 head의 출력 y를 이어 붙여 "
     "W_O(c_proj)를 곱하면 head들이 섞이고, 그 결과가 residual stream에 더해집니다."),
    ("attention sink", "attention sink",
     "The token on which heads park the attention they have no better use for (usually the first, the "
     "<|endoftext|> a document begins with; in a prompt cut to the context, its first token): a row must sum to 1. "
     "--heads gives a head that does this the first-token role.",
     "특별히 볼 key가 없을 때 head들이 남는 attention을 몰아 두는 토큰입니다(보통 맨 앞의 <|endoftext|>이고, context에 "
     "맞춰 잘린 prompt에서는 그 첫 토큰). 한 행의 합은 반드시 1이어야 하기 때문입니다. 이런 head를 --heads는 “첫 토큰” "
     "역할로 표시합니다."),
    ("entropy / distance", "엔트로피 / 거리 (entropy / distance)",
     "Two statistics of a head's attention, averaged over its queries: entropy, −Σ_k att ln att in "
     "nats, is how spread the attention is (0 = one key; ln(q+1) = even over the q+1 keys a query sees), and "
     "distance, Σ_k att (q − k), is how many tokens back the head looks on average.",
     "head의 attention 값을 query마다 재어 평균한 두 통계입니다. 엔트로피(−Σ_k att ln att, nats)는 "
     "attention이 퍼진 정도로, 0이면 key 하나만 보고 ln(q+1)이면 볼 수 있는 key q+1개에 고르게 퍼져 있다는 뜻입니다. "
     "거리(Σ_k att (q − k))는 head가 평균 몇 토큰 뒤를 보는지입니다."),
    ("previous-token head", "이전 토큰 head (previous-token head)",
     "A head whose query at position i looks at key i−1, the token just before it. It writes what that token was "
     "into the residual stream at i, which an induction head in a later layer needs; --heads measures it on "
     "held-out text.",
     "위치 i의 query가 바로 앞 토큰인 key i−1을 보는 head입니다. 앞 토큰의 정보를 위치 i의 residual stream으로 옮겨 "
     "오고, 뒤 layer의 induction head가 이 정보를 씁니다. --heads는 검증 텍스트에서 이 역할을 잽니다."),
    ("induction head", "induction head",
     "A head that continues a repeat: at a token A that came before as “A B”, it looks at the B that followed A "
     "last time and copies it, so “A B … A” predicts B. It needs a previous-token head in an earlier layer; "
     "--heads measures it on random tokens repeated twice.",
     "반복을 이어 가는 head입니다. 앞에 “A B”가 나온 적이 있으면, 다시 나온 A에서 지난번 A 다음에 온 B를 보고 그 "
     "내용을 가져오므로 “A B … A” 다음에 B를 예측하게 됩니다. 앞 layer에 이전 토큰 head가 있어야 동작하며, --heads는 "
     "무작위 토큰을 두 번 반복한 시퀀스에서 이 역할을 잽니다."),
    ("copying circuit", "복사 회로 (copying circuit)",
     "A previous-token head in one layer and an induction head in a later one working together: the first writes at "
     "every position which token came before it, and the second, at a repeated token, finds the position whose "
     "previous token is the current one and copies the token there. train.py names one when the previous-token "
     "score and the induction score each reach 0.5 and the in-context loss drop reaches 2 nats.",
     "앞 layer의 이전 토큰 head와 뒤 layer의 induction head가 함께 하는 일입니다. 앞의 head는 위치마다 바로 앞 토큰이 "
     "무엇이었는지를 stream에 쓰고, 뒤의 head는 반복된 토큰에서 “바로 앞 토큰이 지금 토큰인 자리”를 찾아 그 자리의 "
     "토큰을 베껴 옵니다. 이전 토큰 점수와 induction 점수가 각각 0.5, in-context loss 감소가 2 nats에 이르면 "
     "train.py가 마지막에 회로가 생겼다고 알려 줍니다."),
    ("word roles", "같은 어절 / 어절 첫 토큰 / 앞 어절 (word roles)",
     "Three role scores of --heads that read Korean words (어절, a text's units between spaces): for a query token "
     "that is not the first of its word, the attention on the earlier tokens of its word (same-word) and on its "
     "word's first token (word-start); for a token of the third word on, the attention on the tokens of the word "
     "before (previous-word). Each leaves the token just before the query to the previous-token role (its keys are "
     "at least two tokens back), so a previous-token head keeps its name.",
     "--heads가 어절(띄어쓰기로 나뉜 단위)을 읽는 세 역할 점수입니다. 어절의 첫 토큰이 아닌 query 토큰이 같은 어절의 "
     "앞 토큰들에 주는 attention 값이 같은 어절, 그 어절의 첫 토큰에 주는 값이 어절 첫 토큰이고, 셋째 어절부터의 "
     "토큰이 바로 앞 어절의 토큰들에 주는 값이 앞 어절입니다. 셋 다 바로 앞 토큰은 이전 토큰 역할에 남겨 두므로(key는 "
     "두 토큰 이상 앞), 이전 토큰 head는 제 이름을 유지합니다."),
    ("reading by word", "어절 단위로 보기 (reading by word)",
     "--words sums a head's attention over each key word's tokens and averages it over the query word's tokens, so "
     "a word's row still sums to 1. A word of more tokens gets more: under attention spread evenly a word of 4 tokens "
     "gets 4 times a word of 1, so the views show each word's tokens and its even-spread value beside the measured "
     "one.",
     "--words는 head의 attention 값을 key 어절의 토큰들에 대해 더하고 query 어절의 토큰들로 평균하므로, 어절 행의 합도 "
     "1입니다. 토큰이 많은 어절일수록 값이 커지므로(고르게 퍼진 attention에서도 토큰 4개인 어절은 1개인 어절의 4배), "
     "보기마다 어절의 토큰 수와 고르게 퍼졌을 때의 값을 함께 보여 줍니다."),
    ("switching a head off", "head 끄기 (switching a head off)",
     "Replacing a head's output y (before W_O) at every token, to test what the head does: by its mean over "
     "held-out text (the default), which keeps what the head always adds and removes only what depends on the "
     "text, or by zeros (--ablate-mode zero), which also pushes the residual stream off the range the later layers "
     "were trained on. The loss it adds is what the head did; where it looked is only a hint.",
     "head가 하는 일을 확인하려고 모든 토큰에서 그 head의 출력 y(W_O 앞)를 바꿔 넣는 것입니다. 기본값은 검증 텍스트에서 "
     "잰 평균으로, head가 늘 더하는 몫은 남기고 텍스트에 따라 달라지는 몫만 없앱니다. 영벡터(--ablate-mode zero)는 "
     "residual stream을 뒤 layer들이 학습한 범위 밖으로도 밀어내므로, 늘어난 loss에 그 효과가 섞입니다."),
    ("MLP", "MLP",
     "The second sublayer of a block: c_fc widens each token's vector 4 times, a GELU bends it, c_proj brings it "
     "back, and the result is added to the residual stream. It works on each token alone, never looking at "
     "another; model.mlp = false leaves it out (the lesson run).",
     "block의 두 번째 sublayer입니다. c_fc로 각 토큰의 벡터를 4배로 넓히고 GELU를 거친 뒤 c_proj로 다시 줄여 residual "
     "stream에 더합니다. 다른 토큰은 보지 않고 토큰마다 따로 계산하며, model.mlp = false이면 빠집니다(실습용 run)."),
    ("GELU", "GELU",
     "The MLP's bend: GELU(x) = x Φ(x), with Φ the standard normal distribution's cumulative probability, so about "
     "x for large x, about 0 for very negative x, and smooth in between (GPT-2 used a tanh approximation of it).",
     "MLP의 비선형 함수입니다. GELU(x) = x Φ(x)이고 Φ는 표준정규분포의 누적확률이라, x가 크면 거의 x, 아주 작은 음수면 "
     "거의 0이며 그 사이는 부드럽게 이어집니다(GPT-2는 tanh로 근사한 식을 썼습니다)."),
    ("logits", "logits",
     "The model's output at each position, one number per token of the vocabulary: lm_head(ln_f(residual "
     "stream)). The softmax turns them into the next token's probabilities, and the loss is −ln of the "
     "probability given to the token that actually came next.",
     "각 위치에서 모델이 내는 출력으로, 어휘의 토큰마다 숫자가 하나씩 있습니다(lm_head(ln_f(residual stream))). "
     "softmax를 거치면 다음 토큰의 확률이 되고, loss는 실제로 다음에 온 토큰이 받은 확률에 −ln을 취한 값입니다."),
    ("logit lens", "logit lens",
     "Reads the residual stream after the embeddings and after each block through ln_f and lm_head, as if the "
     "model stopped there: the next token it would pick at that stage (--lens). The last stage is the model's "
     "own answer.",
     "embedding 뒤와 각 block 뒤의 residual stream을 ln_f와 lm_head에 통과시켜, 모델이 거기서 멈췄다면 고를 다음 "
     "토큰을 보여 줍니다(--lens). 마지막 단계가 모델의 실제 답입니다."),
    ("share (direct attribution)", "몫 (direct attribution)",
     "What --why splits a logit difference into: each part's output (an embedding, a head's y_h W_O, a bias, an MLP) "
     "as it enters the last residual stream, through ln_f with its scale σ held as computed, times the difference of "
     "the two tokens' rows of lm_head; the shares add up exactly to the difference. A share counts only what the part "
     "writes straight into that stream, so what a head does through later heads and MLPs is counted in their shares: "
     "the lesson run's previous-token head 0.2 reaches the logits only through the induction heads, yet switching it "
     "off takes away the whole in-context loss drop of 7.87 nats. The effect of switching a part off is what "
     "--ablate and --patch measure, not its share.",
     "--why가 logit 차이를 나누는 단위입니다. 각 부분(embedding, head의 y_h W_O, bias, MLP)이 마지막 residual stream에 "
     "더한 값을 σ를 계산된 값으로 고정한 ln_f에 통과시키고 두 토큰의 lm_head 행의 차이와 곱한 것으로, 몫들의 합은 "
     "정확히 그 차이입니다. 몫은 그 부분이 그 stream에 직접 더한 값만 세므로 한 head가 뒤 layer의 head와 MLP를 거쳐 "
     "미치는 효과는 그쪽 몫에 들어가고(실습용 run의 이전 토큰 head 0.2는 induction head를 거쳐서만 logit에 닿지만, "
     "끄면 in-context loss 감소 7.87 nats가 전부 사라집니다), 부분을 껐을 때의 효과는 몫이 아니라 --ablate와 "
     "--patch로 잽니다."),
    ("patching", "patching (깨끗한 텍스트, 바꾼 텍스트)",
     "--patch runs two texts of the same length, a clean one and a corrupted one that differs in a few tokens, and "
     "puts one piece of the clean run (the residual stream at one stage and token, or a head's output y) into the "
     "corrupted run at the same place. What comes back is the share of the gap between the two texts' logit "
     "differences, (patched − corrupted) / (clean − corrupted): 1 when that piece alone carries the whole "
     "difference, 0 when it carries none, below 0 when it pushes further toward the corrupted text's answer. Unlike "
     "a share of --why it measures an effect, since the piece is changed and everything after it computed again.",
     "--patch는 토큰 수가 같은 두 텍스트, 깨끗한 텍스트(clean)와 토큰 몇 개를 바꾼 텍스트(corrupted)를 돌리고, 깨끗한 "
     "run의 조각 하나(한 단계 한 토큰의 residual stream, 또는 한 head의 출력 y)를 바꾼 run의 같은 자리에 넣습니다. "
     "되돌아온 비율은 (patch 후 − 바꾼 텍스트) / (깨끗한 텍스트 − 바꾼 텍스트), 곧 두 텍스트의 logit 차이 사이 간격 중 "
     "되돌아온 부분으로, 그 조각 하나가 차이를 전부 나르면 1, 전혀 나르지 않으면 0, 바꾼 텍스트의 답 쪽으로 더 밀면 "
     "음수입니다. --why의 몫과 달리 이것은 효과를 잽니다: 조각을 바꾸고 그 뒤를 모두 다시 계산하기 때문입니다."),
    ("temperature", "temperature",
     "The logits are divided by the temperature before the softmax: below 1 the choice leans harder toward the "
     "likeliest tokens, above 1 it spreads out, and 0 always takes the likeliest (greedy).",
     "softmax 전에 logit을 temperature로 나눕니다. 1보다 작으면 확률이 높은 토큰 쪽으로 더 쏠리고, 1보다 크면 "
     "분포가 평평해지며, 0이면 언제나 확률이 가장 높은 토큰을 고릅니다(greedy)."),
    ("top-k", "top-k",
     "Samples only among the k likeliest tokens; every other logit becomes −∞.",
     "확률이 가장 높은 토큰 k개 중에서만 고릅니다. 나머지 토큰의 logit은 −∞가 됩니다."),
    ("top-p", "top-p",
     "Nucleus sampling: samples only among the smallest set of likeliest tokens whose probabilities add up to at "
     "least p, so there are few candidates where the model is sure and many where it is not.",
     "확률이 높은 순서로 토큰을 모아 확률의 합이 p 이상이 되는 가장 작은 집합 안에서만 고릅니다(nucleus sampling). "
     "모델이 확신할수록 후보가 적고, 애매할수록 많아집니다."),
    ("KV cache / prefill", "KV cache / prefill",
     "While generating, each layer keeps the keys and values of the tokens so far, so a new token computes only "
     "its own q, k, v and attends over the cache instead of recomputing the whole text. The prefill is the first "
     "forward, which runs the whole prompt at once and fills the cache.",
     "글을 생성하는 동안 layer마다 지금까지 나온 토큰의 key와 value를 저장해 두는 곳입니다. 새 토큰은 자기 q, k, v만 "
     "계산하고 cache의 key와 value를 쓰면 되므로 텍스트 전체를 다시 계산하지 않습니다. prefill은 prompt 전체를 한 번의 "
     "forward로 계산해 cache를 채우는 첫 단계입니다."),
    ("nats", "nats",
     "The unit of a loss taken with the natural logarithm: the loss of a token is −ln p, p the probability the "
     "model gave it. 1 nat is 1 / ln 2 ≈ 1.44 bits, and a loss of 0 means the right token had probability 1.",
     "자연로그로 잰 loss의 단위입니다. 토큰 하나의 loss는 −ln p(p는 모델이 그 토큰에 준 확률)입니다. 1 nat은 "
     "1 / ln 2 ≈ 1.44 bit이고, loss가 0이면 정답 토큰의 확률이 1이었다는 뜻입니다."),
    ("perplexity", "perplexity",
     "exp of the mean loss per token: how many equally likely tokens the model's uncertainty amounts to (1 = always "
     "sure and right; the vocabulary size = guessing at random).",
     "토큰당 평균 loss의 exp입니다. 모델의 불확실성이 똑같이 그럴듯한 토큰 몇 개 중에서 고르는 것과 같은지를 "
     "나타냅니다(1 = 언제나 확신하고 맞음, 어휘 크기 = 무작위로 고름)."),
    ("bits per character", "글자당 비트 (bits per character)",
     "The whole loss of a text in bits (nats / ln 2) divided by its number of characters. Unlike the loss per "
     "token it does not depend on the tokenizer, so models with different vocabularies can be compared.",
     "텍스트 전체의 loss를 bit 단위(nats / ln 2)로 바꿔 글자 수로 나눈 값입니다. 토큰당 loss와 달리 토크나이저에 따라 "
     "달라지지 않으므로, 어휘가 다른 모델끼리도 비교할 수 있습니다."),
    ("in-context loss drop", "in-context loss 감소 (in-context loss drop)",
     "The loss on the first copy of a random token sequence repeated twice, minus the loss on the second copy, in "
     "nats. Random tokens cannot be memorised, so only copying from the context (induction heads) brings the "
     "second copy's loss down; in the lesson run the drop jumps from about 1 nat to 8 as its heads form.",
     "무작위 토큰 시퀀스를 두 번 반복했을 때, 첫 번째 복사본의 loss에서 두 번째 복사본의 loss를 뺀 값입니다(nats). "
     "무작위 토큰은 외울 수 없으므로 두 번째 loss를 낮추는 방법은 context에서 베끼는 것(induction head)뿐입니다. "
     "실습용 run에서는 head가 생기면서 이 값이 약 1 nat에서 8 nats로 뜁니다."),
]


# One Korean term per idea, across the terminal, the PNGs, the page, README.ko.md and the Korean docs: (the idea, the
# term used, the forms it replaced, as regular expressions). tests/test_glossary.py checks that no replaced form
# appears in any Korean text; README.ko.md shows the table.
KOREAN_TERMS: list[tuple[str, str, list[str]]] = [
    ("the post-softmax numbers of attention", "attention 값", [r"attention 가중치"]),
    ("held-out text", "검증 텍스트", [r"검증 데이터", r"학습에 쓰지 않은 텍스트"]),
    ("a token's way through the model", "경로", [r"의 길(?!이)", r"길:"]),
    ("a map as evidence", "단서", [r"힌트"]),
    ("a copy of a repeated sequence", "복사본", [r"(?<!복)사본"]),
    ("what --heads measures per role", "역할 점수", [r"score의 정의"]),
    ("the output layer", "lm_head", [r"tied head"]),
    ("the likeliest", "확률이 가장 높은", [r"가능성이 (가장 )?높은"]),
    ("a head with no clear role", "뚜렷한 역할 없음", [r"혼합"]),
    ("a row or dimension by its index", "N번 행, N번 차원", [r"번째 (행|차원)"]),
    ("q·k_j before the division by √d_k", "내적 q·k_j", [r"score q·k_j"]),
    ("a transformer layer", "layer", [r"(?<!출력)층"]),  # 출력층, the output layer, is lm_head's name
    ("the vector each token carries", "residual stream", [r"흐름"]),
    ("an attention map", "map", [r"(?<![가-힣])지도(?!학습)"]),
    ("a head's attention on some keys, summed", "attention 값의 합", [r"질량"]),
    ("weights kept during training", "snapshot", [r"스냅[숏샷]"]),
    ("the mechanism", "self-attention", [r"셀프 ?어텐션", r"어텐션"]),
    ("what --why splits a logit difference into", "몫", [r"기여도", r"기여분"]),
    ("what --patch measures", "되돌아온 비율", [r"되돌아오는 몫", r"되돌아온 몫"]),
    ("the text --patch changes", "바꾼 텍스트", [r"망가뜨린", r"손상된 텍스트"]),
    ("a Korean word, a unit between spaces", "어절", [r"띄어쓰기 단어", r"단어의 시작"]),
    ("the measure best/ keeps in Korean lines", "검증 loss", [r"val loss"]),
]
