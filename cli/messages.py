"""Every text the commands print and the page shows, in English and in Korean: one table, looked up by key.

    say = messages("ko")                                  # "en", "ko", or None: the terminal's (below)
    say("explain.step4", d=16, C=64, H=4, root="4.0000")  # one text, its {fields} filled in
    use_language("ko")                                    # where a command starts (--lang): messages() says Korean

Korean follows the explainers Korean learners read: Korean sentences, with the technical terms in the form
they are used in (query, key, value, score, softmax, √d_k, mask, head, token, residual stream, ...), and
every number and formula as in English. Both versions of a text take the same {fields} and carry the same
literal numbers (tests/test_messages.py checks it), so a walkthrough in Korean shows exactly the numbers
of the English one. The `page.*` and `role.*` texts go into the offline page, which switches language in
place; their fields are plain `{name}`s (the page fills them in with JavaScript). Error lines (`error: ...`)
stay English, as do the settings train.py lists as key=value.

A Korean particle never follows a value as fixed text: 은/는, 이/가, 을/를, 과/와 and (으)로 depend on the value's
last sound ('한다'가, '법률'이, 0.6456은 "육"). Either the sentence is turned so that no particle follows a value, or
the field names the particle, `{heads:을}`, and `particle` picks 을 or 를 from the value's last sound (a Hangul
syllable's final consonant, a number as Korean reads it, a Latin letter's name). tests/test_messages.py checks
every text for a value followed by a fixed particle.
"""

import os
import re
import string

from cli.arguments import ArgumentValueError  # a UserError and a ValueError

LANGUAGES = ("en", "ko")

MESSAGES: dict[str, tuple[str, str]] = {
    # ---- the roles of inspection/views/roles.py -----------------------------------------------------------
    "role.previous-token": ("previous-token", "이전 토큰"),
    "role.first-token": ("first-token", "첫 토큰"),
    "role.self": ("self", "자기 자신"),
    "role.duplicate-token": ("duplicate-token", "중복 토큰"),
    "role.induction": ("induction", "induction"),
    "role.same-word": ("same-word", "같은 어절"),
    "role.word-start": ("word-start", "어절 첫 토큰"),
    "role.previous-word": ("previous-word", "앞 어절"),
    "role.mixed": ("mixed", "뚜렷한 역할 없음"),
    "roles.header": ("rank layer head  strongest role", "순위 layer head  가장 강한 역할"),
    "roles.columns": ("previous|first|self|duplicate|induction", "이전 토큰|첫 토큰|자기 자신|중복 토큰|induction"),
    "roles.word_columns": ("same word|word start|prev word", "같은 어절|어절 첫 토큰|앞 어절"),
    "roles.chance": ("chance (an even spread)", "우연 수준 (고르게 퍼진 attention)"),
    "roles.sequences": (
        "induction sequences ({count} x 2 copies of {n} random tokens): loss {first} nats on the first copy, "
        "{second} on the second (drop {drop})",
        "induction 시퀀스 (무작위 토큰 {n}개를 2번 반복, 시퀀스 {count}개): 첫 번째 복사본의 loss {first} nats, "
        "두 번째 복사본 {second} (감소 {drop})"),
    "score.ablated": ("with heads {heads} off: {diff} bits/char against the full model's {full}",
                      "끈 head {heads}: 전체 모델 {full} bits/char 대비 {diff} bits/char"),
    "roles.off_columns": ("+loss off|-drop off", "+loss(끔)|-감소(끔)"),
    "roles.off": ("off: each head switched off alone ({mode}): +loss = the held-out loss it adds, in nats per token "
                  "(full model {loss}); -drop = the in-context loss drop it takes away (full model {drop})",
                  "끔: head를 하나씩 따로 끄고 잰 값({mode}). +loss = 검증 텍스트의 loss가 토큰당 늘어난 양, nats (전체 모델 {loss}); -감소 = "
                  "in-context loss 감소폭이 그만큼 줄어듦 (전체 모델 {drop})"),
    "ablate.mean": ("its output replaced by its mean on held-out text", "출력을 검증 텍스트에서의 평균으로 바꿈"),
    "ablate.zero": ("its output replaced by zeros", "출력을 영벡터로 바꿈"),
    # a switched-off head wherever its numbers appear (inspection/trace.py records the y W_O receives)
    "ablate.short_mean": ("mean", "평균"),
    "ablate.short_zero": ("zero", "영벡터"),
    "ablate.off": ("off ({mode})", "끔 ({mode})"),
    "ablate.map_note": ("a switched-off head still attends as its map shows; only its output is replaced",
                        "끈 head도 attention은 map 그대로 계산됩니다. 바뀌는 것은 출력뿐입니다"),
    "explain.off": ("Head {layer}.{head} is switched off ({mode}). Its attention below is still computed as usual "
                    "(its map shows where it looks), but W_O does not receive its y = Σ_j w_j v_j: step 7 shows what "
                    "W_O receives instead.",
                    "이 head({layer}.{head})는 꺼져 있습니다({mode}). 아래의 attention은 평소처럼 계산되지만(map은 이 head가 보는 곳을 보여 줍니다), "
                    "W_O가 받는 것은 y = Σ_j w_j v_j가 아닙니다. W_O가 대신 받는 값은 7단계에 있습니다."),
    "explain.step7_off": ("7. Switched off: in place of y = Σ_j w_j v_j, W_O receives y = {y}   |y| = {norm}. The "
                          "terms below are those of Σ_j w_j v_j, which W_O no longer receives.",
                          "7. 꺼져 있음: W_O는 y = Σ_j w_j v_j 대신 다음 값을 받습니다: y = {y}   |y| = {norm}. 아래 항들은 W_O가 더는 받지 "
                          "않는 Σ_j w_j v_j의 항입니다."),
    "explain.off_mark": (" (off)", " (끔)"),
    "explain.off_hint": ("A map shows where a head looked, not why the output changed. This head is switched off: "
                         "what it hands on here is its replacement, so compare the next token and the loss with it "
                         "on to see what its own output does.",
                         "attention map은 head가 어디를 봤는지 보여 줄 뿐, 출력이 왜 그렇게 나왔는지는 알려 주지 않습니다. 이 head는 꺼져 있어 여기서 넘겨주는 값은 "
                         "대신 넣은 값입니다. 이 head 자신의 출력이 하는 일을 보려면 다음 토큰과 loss를 head를 켠 모델의 것과 비교해 보세요."),
    "path.off_note": ("   head {heads}: its attention is still computed, but what W_O receives from it is replaced, "
                      "and |share| is the replacement's",
                      "   head {heads}. attention은 그대로 계산되지만 W_O에 넘기는 값은 바뀌며, |share|는 대신 넣은 값의 몫입니다"),
    "lens.off": ("head {heads}: every stage is read from the model with them off",
                 "head {heads}: 모든 단계는 이 head를 끈 모델에서 읽은 값입니다"),
    "why.off": ("head {heads}: what each writes is its replacement's (its mean, or zeros), and its share that of the "
                "replacement, not of the head; the others' shares are read with them off",
                "head {heads}: 이 head가 쓰는 값은 대신 넣은 값(평균이나 영벡터)이고, 그 몫도 head의 것이 아니라 대신 넣은 "
                "값의 것입니다. 다른 부분의 몫은 이 head를 끈 채로 읽은 값입니다"),
    "patch.off": ("head {heads}: patching one gives the value it is replaced by in both runs, so it recovers nothing "
                  "by construction; the others were patched with them off",
                  "head {heads}: 두 run 모두에서 대신 넣은 값을 내므로 patch해도 되돌아오는 것이 없습니다. 다른 부분은 "
                  "이 head를 끈 채로 patch했습니다"),
    "roles.title": ("what each head does (inspection/views/roles.py defines the role scores), on {where}:",
                    "각 head가 하는 일 (역할 점수의 정의: inspection/views/roles.py), 측정한 텍스트: {where}:"),
    "where.file": ("{path} ({n} tokens)", "{path} (토큰 {n}개)"),
    "where.validation": ("the run's validation split {path} ({n} tokens)", "학습 때 떼어 둔 검증 텍스트 {path} (토큰 {n}개)"),
    "where.sampled": ("{n} tokens the model wrote itself (seed 0, temperature 1): no validation split found for "
                      "{ckpt}",
                      "모델이 스스로 쓴 토큰 {n}개 (seed 0, temperature 1; {ckpt}의 검증 텍스트가 없어 대신 사용)"),
    # ---- per-head statistics (inspection/views/maps.py) ----------------------------------------------------
    # ---- the logit lens (inspection/views/lens.py) and switched-off heads (common/heads_off.py) ------------------
    "lens.title": ("logit lens at token {query}: the next token each stage's residual stream predicts when read "
                   "through ln_f and lm_head; rank = where the model's final choice ({choice}) stands at that stage",
                   "logit lens (토큰 {query} 위치): 각 단계의 residual stream을 ln_f와 lm_head에 바로 통과시켰을 때 예측되는 다음 토큰. 순위 = "
                   "모델의 최종 선택({choice})이 그 단계에서 몇 위인지"),
    "lens.embeddings": ("token + position embeddings", "토큰 + 위치 embedding"),
    "lens.block": ("after block {layer}", "block {layer} 뒤"),
    "lens.output": (" = output", " = 출력"),
    "lens.rank": ("rank {rank}", "순위 {rank}"),
    "lens.stage": ("stage", "단계"),
    "lens.rank_column": ("rank of the output's choice", "최종 선택의 순위"),
    "lens.caveat": ("the earlier stages were never trained to be read this way (in training only the last block's "
                    "output meets ln_f and lm_head): their guesses are a rough reading, not what the model would "
                    "answer there",
                    "앞 단계들은 이렇게 읽히도록 학습된 적이 없습니다(학습에서 ln_f와 lm_head를 만나는 것은 마지막 block의 출력뿐입니다). 그래서 그 예측은 대략적인 읽기일 "
                    "뿐, 모델이 거기서 내놓을 답이 아닙니다"),
    "stats.title": ("attention statistics per head over {n} tokens (inspection/views/maps.py defines them; a map holds "
                    "{n} x {n} = {cells} numbers, so twice the text costs the attention maps four times the work and "
                    "memory):",
                    "head별 attention 통계, 토큰 {n}개 (정의: inspection/views/maps.py; map 하나가 {n} x {n} = {cells}개 값이므로, 텍스트가 두 "
                    "배면 attention map의 계산과 메모리는 네 배가 됩니다):"),
    "stats.columns": ("layer|head|entropy|distance|prev|first|self", "layer|head|엔트로피|거리|이전 토큰|첫 토큰|자기 자신"),
    "stats.defs": ("entropy: how spread a head's attention is, in nats (0 = one key; ln(q+1) = even over the q+1 "
                   "keys it sees); distance: how many tokens back it looks on average; prev, first, self: the role "
                   "scores of --heads (- where the text has fewer than 3 tokens to measure them on)",
                   "엔트로피: head의 attention이 퍼진 정도, nats (0 = key 하나만 봄; ln(q+1) = 볼 수 있는 key q+1개에 고르게); 거리: 평균 몇 토큰 "
                   "뒤를 보는지; 이전 토큰, 첫 토큰, 자기 자신: --heads의 역할 점수 (토큰이 3개 미만이면 잴 수 없어 -)"),
    "stats.top": ("layer {layer} head {head}: the tokens each query attends to most",
                  "layer {layer} head {head}: 각 query가 가장 많이 보는(attention 값이 가장 큰) 토큰"),
    # ---- the walkthrough of one head at one query (inspection/views/walkthrough.py) ------------------------------
    "explain.title": ("Layer {layer}, head {head}, query token {i} {token} of {T} tokens (n_embd {C}, {H} heads of "
                      "d_k = {d} dimensions)",
                      "layer {layer}, head {head}, 토큰 {T}개 중 query 토큰 {i} {token} (n_embd {C}, head {H}개, "
                      "각 d_k = {d}차원)"),
    "explain.step1": ("1. The query and the keys it may see: token {i} attends to tokens 0..{i} (itself and every token "
                      "before it){masked}.",
                      "1. query와 그 query가 볼 수 있는 key: 토큰 {i}의 attention 대상은 토큰 0..{i}(자기 자신과 그 앞의 "
                      "모든 토큰)입니다{masked}."),
    "explain.masked_later": ("; the later tokens are masked (step 5)", ". 뒤의 토큰은 mask됩니다(5단계)"),
    "explain.some_keys": ("   {shown} of the {n} keys are listed: the first, the most attended, the last few.",
                          "   표에는 key {n}개 중 {shown}개만 싣습니다: 첫 key, attention 값이 가장 큰 key들, 마지막 몇 개."),
    "explain.x": ("   Normalised input x_j = ln_1(residual stream at j): first {dims} of {C} dims and the norm.",
                  "   정규화된 입력 x_j = ln_1(j 위치의 residual stream): {C}차원 중 처음 {dims}개 값과 norm."),
    "explain.token": ("token", "토큰"),
    "explain.masked": ("masked", "mask 후"),
    "explain.step2": ("2. Into head {head}: q = x_{i} W_Q + b_Q, k_j = x_j W_K + b_K, v_j = x_j W_V + b_V "
                      "(W: {C} x {d}, this head's columns of c_attn)",
                      "2. head {head}의 q, k, v: q = x_{i} W_Q + b_Q, k_j = x_j W_K + b_K, v_j = x_j W_V + b_V "
                      "(W: {C} x {d}, c_attn 중 이 head의 열)"),
    "explain.step34": ("3. The dot products q·k_j.  4. Divided by √d_k they are the scores; d_k = {d} (n_embd / "
                       "n_head = {C} / {H}): √{d} = {root}. If the components of q and k have variance 1, q·k_j has "
                       "variance d_k; divided by √d_k, the scores keep a variance near 1 whatever d_k is.",
                       "3. 내적 q·k_j.  4. 이것을 √d_k로 나눈 값이 score입니다. d_k = {d} (n_embd / n_head = {C} / {H}): √{d} = "
                       "{root}. q와 k의 성분이 분산 1이면 q·k_j의 분산은 d_k이므로, √d_k로 나누면 d_k가 얼마든 score의 분산이 약 1로 유지됩니다."),
    "explain.step56": ("5. Masked: a key after the query gets -∞, so its attention is 0.  6. Softmax: w_j = exp(s_j) / "
                       "Σ exp(s), over the row.",
                       "5. mask: query보다 뒤에 있는 key의 score는 -∞가 되어 w_j가 0이 됩니다.  6. softmax: 한 행 안에서 "
                       "w_j = exp(s_j) / Σ exp(s)."),
    "explain.more_masked": ("    …  and {n} more later keys, all masked: -∞, w_j = 0",
                            "    …  그리고 뒤의 key {n}개, 모두 mask: -∞, w_j = 0"),
    "explain.largest": ("   the largest terms w_j v_j (by norm w_j |v_j|):", "   가장 큰 항 w_j v_j (norm w_j |v_j| 기준):"),
    "explain.step8": ("8. Where y goes: its {d} values become dims {lo}..{last} of the {C}-vector that concatenates "
                      "the outputs of all {H} heads at token {i}; that vector times W_O ({C} x {C}) plus b_O is",
                      "8. y가 가는 곳: y의 값 {d}개는 토큰 {i}에서 head {H}개 모두의 출력을 이어 붙인 {C}차원 벡터의 {lo}..{last}번 차원이 되고, 그 "
                      "벡터에 W_O ({C} x {C})를 곱하고 b_O를 더한 결과는 다음과 같습니다:"),
    "explain.share": ("   of which this head's share y W_O[{lo}:{end}] = {share}   |share| = {norm}",
                      "   그중 이 head의 몫 y W_O[{lo}:{end}] = {share}   |share| = {norm}"),
    "explain.residual": ("   out_{i} is added to the residual stream (resid_{i} + out_{i}){mlp}.",
                         "   out_{i}: 이 값이 residual stream에 더해집니다 (resid_{i} + out_{i}){mlp}."),
    "explain.mlp_follows": (", and the block's MLP follows", ". 이어서 같은 block의 MLP가 계산됩니다"),
    "explain.why_qkv": ("   q, k and v are three projections of the same input x by different matrices W_Q, W_K, "
                        "W_V: q is what token {i} looks for, k_j the label token j is matched by, v_j what token j "
                        "actually hands over. Where to look is decided by q·k, what is carried by v.",
                        "   q, k, v는 같은 입력 x에 서로 다른 행렬 W_Q, W_K, W_V를 곱한 세 projection입니다. q는 이 query 토큰({i})이 무엇을 "
                        "찾는지, k_j는 토큰 j가 내건 이름표, v_j는 토큰 j가 실제로 넘겨주는 내용입니다. 어디를 볼지는 q·k가, 무엇을 가져올지는 v가 정합니다."),
    "explain.why_scale": ("   Why divide: over the visible keys the standard deviation of q·k_j is {before}, of the "
                          "scores {after} (their ratio is √d_k). The largest attention: {largest} with the "
                          "division, {undivided} without it. The larger d_k, the wider undivided scores spread "
                          "(√d_k times: 8 at GPT-2's d_k = 64), the more softmax piles on one key (it saturates), "
                          "and the other keys get almost no gradient.",
                          "   나누는 이유: 볼 수 있는 key들에서 q·k_j의 표준편차는 {before}, score의 표준편차는 {after}입니다(둘의 비가 √d_k). 가장 "
                          "큰 attention 값: 나누면 {largest}, 나누지 않으면 {undivided}. d_k가 클수록 나누지 않은 score가 넓게 퍼지고(√d_k배: "
                          "GPT-2의 d_k = 64이면 8배), softmax가 한 key로 쏠리며(포화), 다른 key로는 gradient가 거의 흐르지 않습니다."),
    "explain.why_mask": ("   Why mask before softmax: exp(-∞) = 0, so a later key gets exactly 0 and the visible "
                         "keys' attention still sums to 1 (Σ w_j above). Masked after softmax, a row would sum to "
                         "less than 1, and the scores of the keys ahead would already sit in the denominator: the "
                         "future would leak in.",
                         "   softmax 전에 mask하는 이유: exp(-∞) = 0이므로 뒤의 key는 정확히 0을 받고, 볼 수 있는 key들의 attention 값은 그대로 "
                         "합이 1입니다(위의 Σ w_j). softmax 뒤에 mask하면 한 행의 합이 1보다 작아지고, 뒤 key의 score가 이미 분모에 섞여 있어 미래 정보가 "
                         "새어 듭니다."),
    "explain.why_mix": ("   y mixes every visible value; it is not a copy of the strongest: the largest term w_j |v_j| is "
                        "{share}% of Σ_j w_j |v_j|.",
                        "   y는 가장 강한 value 하나를 복사한 것이 아니라 볼 수 있는 모든 value를 섞은 것입니다: 가장 큰 "
                        "항 w_j |v_j|는 Σ_j w_j |v_j|의 {share}%입니다."),
    "explain.why_heads": ("   Why several heads: each has its own W_Q, W_K and W_V, so together they can attend to "
                          "several relations at once, and W_O mixes their outputs. Each head's |share| of out at "
                          "this token: {shares}.",
                          "   head가 여러 개인 이유: head마다 W_Q, W_K, W_V가 따로 있어 여러 관계를 동시에 볼 수 있고, W_O가 그 출력들을 섞습니다. 이 "
                          "토큰에서 out에 대한 head별 |share|: {shares}."),
    "explain.cells": ("   As cells, one per dimension (red above 0, blue below; hover for the number): query {i} and the "
                      "key it attends to most, {j} {token} (w_j = {w}). q ⊙ k_j multiplies q and k_j dimension by "
                      "dimension; its sum is step 3's q·k_j.",
                      "   차원마다 한 칸씩 색으로 그렸습니다(0보다 크면 빨강, 작으면 파랑, 마우스를 올리면 값): query {i}, 그리고 그 "
                      "query가 가장 많이 보는 key {j} {token} (w_j = {w}). q ⊙ k_j는 q와 k_j를 차원끼리 곱한 것이고, 그 합이 3단계의 "
                      "q·k_j입니다."),
    "explain.numbers": ("x_j, k_j and v_j of each key listed, as numbers", "key마다 x_j, k_j, v_j의 값"),
    "explain.stack": ("   y drawn: each visible value v_j as a row, as strong as its weight w_j (the bar); y under them "
                      "is their weighted sum Σ_j w_j v_j.",
                      "   y를 그림으로: 볼 수 있는 value v_j를 한 줄씩, 그 가중치 w_j(막대)만큼 진하게 그렸습니다. 맨 아래 y는 이들의 "
                      "가중합 Σ_j w_j v_j입니다."),
    # ---- the path of one token through the whole forward pass (inspection/views/path.py) ---------------------
    "path.title": ("The path of token {i} {token} (id {id}; {T} tokens in all) through {L} blocks of n_embd {C} to "
                   "the next token, over a vocabulary of {V}",
                   "토큰 {i} {token}(id {id}, 전체 {T}개 중)에서 다음 토큰까지의 경로: block {L}개(n_embd {C}), 어휘 크기 {V}"),
    "path.embed": ("1. Embedding. The id picks row {id} of tok_emb, {C} learned numbers for this token; the "
                   "position picks row {i} of pos_emb. Their sum is the residual stream that enters the first "
                   "block. Both are needed: the id says which token, not where, and attention, a weighted sum of "
                   "the values, knows no order without the positions.",
                   "1. embedding. id로 tok_emb[{id}] 행을 꺼냅니다: 이 토큰에 대해 학습된 숫자 {C}개입니다. 위치로는 pos_emb[{i}] 행을 꺼냅니다. 둘을 "
                   "더한 것이 첫 block으로 들어가는 residual stream입니다. 둘 다 필요한 이유: id는 어떤 토큰인지만 말하고 어디에 있는지는 말하지 않으며, "
                   "attention은 value들의 가중합이라 위치 정보가 없으면 토큰의 순서를 모릅니다."),
    "path.blocks": ("2. The blocks. Each reads the residual stream and adds its output to it, never overwriting it. "
                    "ln_1 rescales a copy of the stream (mean 0, variance 1, then a learned gain and bias) for the "
                    "attention, the stream itself unchanged, so every block reads inputs of one size; the {H} heads "
                    "(d_k = {d} each) look at the earlier tokens; out is added; then ln_2 and the MLP, which works "
                    "on each token alone ({C} → 4·{C} → {C}, GELU), add theirs. The table gives, per head, the key "
                    "it attends to most, its attention and the size of its share of out, |y_h W_O|; |·| is the "
                    "stream's norm at each point; --explain L.H --query {i} walks through one head at this token.",
                    "2. block. 각 block은 residual stream을 덮어쓰지 않고 자기 출력을 더하기만 합니다. ln_1은 stream의 복사본을 평균 0, 분산 1로 "
                    "맞추고 학습된 gain과 bias를 적용해 attention에 넘깁니다(stream 자체는 그대로). 그래서 모든 block이 같은 크기의 입력을 읽습니다. 이어서 "
                    "head {H}개(각 d_k = {d})가 앞의 토큰들을 보고, out을 더한 다음 ln_2와 MLP가 자기 몫을 더합니다. MLP는 토큰마다 따로 계산합니다({C} → "
                    "4·{C} → {C}, GELU). 아래 표는 head마다 가장 많이 보는 key, 그 attention 값, out에서 그 head가 차지하는 몫의 크기 |y_h "
                    "W_O|를 보여 줍니다. |·|는 각 지점에서 stream의 norm입니다. 이 토큰에서 한 head의 계산은 --explain L.H --query {i} 명령으로 "
                    "단계별로 볼 수 있습니다."),
    "path.blocks_no_mlp": ("2. The blocks, attention only (model.mlp = false: no MLP). Each reads the residual "
                           "stream and adds its output to it, never overwriting it. ln_1 rescales a copy of the "
                           "stream (mean 0, variance 1, then a learned gain and bias) for the attention, the stream "
                           "itself unchanged, so every block reads inputs of one size; the {H} heads (d_k = {d} "
                           "each) look at the earlier tokens, and out is added. The table gives, per head, the key "
                           "it attends to most, its attention and the size of its share of out, |y_h W_O|; |·| is "
                           "the stream's norm at each point; --explain L.H --query {i} walks through one head at "
                           "this token.",
                           "2. block, attention만 있음(model.mlp = false: MLP 없음). 각 block은 residual stream을 덮어쓰지 않고 자기 "
                           "출력을 더하기만 합니다. ln_1은 stream의 복사본을 평균 0, 분산 1로 맞추고 학습된 gain과 bias를 적용해 attention에 "
                           "넘깁니다(stream 자체는 그대로). 그래서 모든 block이 같은 크기의 입력을 읽습니다. 이어서 head {H}개(각 d_k = {d})가 앞의 토큰들을 "
                           "보고, out이 더해집니다. 아래 표는 head마다 가장 많이 보는 key, 그 attention 값, out에서 그 head가 차지하는 몫의 크기 |y_h "
                           "W_O|를 보여 줍니다. |·|는 각 지점에서 stream의 norm입니다. 이 토큰에서 한 head의 계산은 --explain L.H --query {i} "
                           "명령으로 단계별로 볼 수 있습니다."),
    "path.block": ("   block {layer}: |resid| {resid} → + attention out ({out}) → {mid} → + MLP → {block}",
                   "   block {layer}: |resid| {resid} → attention out({out}) 더함 → {mid} → MLP 더함 → {block}"),
    "path.block_no_mlp": ("   block {layer}: |resid| {resid} → + attention out ({out}) → {block}",
                          "   block {layer}: |resid| {resid} → attention out({out}) 더함 → {block}"),
    "path.key": ("strongest key", "가장 많이 보는 key"),
    "path.mlp": ("   MLP: |mlp| = {mlp}; {active}% of its {hidden} hidden units are positive after GELU",
                 "   MLP: |mlp| = {mlp}. hidden unit {hidden}개 중 {active}%가 GELU 뒤에 양수입니다"),
    "path.final": ("3. ln_f normalises the last block's output, and lm_head (the output layer, tied to tok_emb) "
                   "multiplies it by tok_emb's {V} x {C} matrix (the rows that read tokens in also write them out): "
                   "one logit per vocabulary token, the dot product of the stream with that token's row.",
                   "3. ln_f가 마지막 block의 출력을 정규화하고, lm_head(출력층, tok_emb와 공유)가 여기에 tok_emb의 {V} x {C} 행렬을 곱합니다(토큰을 "
                   "읽어 들인 그 행들로 토큰을 내보냅니다). 어휘의 토큰마다 logit이 하나씩 나옵니다: stream과 그 토큰 행의 내적입니다."),
    "path.logits": ("   the logits run from {min} to {max}", "   logit 범위: {min} ~ {max}"),
    "path.softmax": ("4. softmax turns the {V} logits into probabilities: p_j = exp(logit_j) / Σ exp(logit). It "
                     "compares tokens: two tokens whose logits differ by 1 have probabilities in the ratio e ≈ "
                     "2.718. The 10 most likely:",
                     "4. softmax가 logit {V}개를 확률로 바꿉니다: p_j = exp(logit_j) / Σ exp(logit). 토큰끼리 비교하는 값이라, 두 토큰의 "
                     "logit 차이가 1이면 확률의 비는 e ≈ 2.718입니다. 확률이 가장 높은 10개:"),
    "path.repetition_penalty": ("   repetition penalty {value}: each token already in the text (the end-of-text "
                                "token aside) has its logit divided by {value} where positive, multiplied where "
                                "negative, so a repeat becomes less likely. {kept} tokens keep a probability above "
                                "0:",
                                "   repetition penalty {value}: 텍스트에 이미 나온 토큰(end-of-text 토큰은 빼고)의 logit을 penalty "
                                "{value}만큼 줄여(양수면 나누고, 음수면 곱합니다) 같은 토큰이 다시 나올 가능성을 낮춥니다. 확률이 0보다 큰 토큰: {kept}개"),
    "path.temperature": ("   temperature {value}: the logits are divided by it before softmax; below 1 sharpens the "
                         "distribution, above 1 flattens it, 0 always takes the most likely token. {kept} tokens "
                         "keep a probability above 0:",
                         "   temperature {value}: softmax 전에 logit을 이 값으로 나눕니다. 1보다 작으면 분포가 뾰족해지고, 1보다 크면 평평해지며, "
                         "0이면 언제나 확률이 가장 높은 토큰을 고릅니다. 확률이 0보다 큰 토큰: {kept}개"),
    "path.top_k": ("   top-k {value}: only the {value} most likely tokens stay; the others get probability 0 and "
                   "the rest is divided again to sum to 1. {kept} tokens left:",
                   "   top-k {value}: 확률이 가장 높은 토큰 {value}개만 남기고 나머지는 확률 0으로 만든 뒤, 남은 확률의 합이 1이 되도록 다시 나눕니다. 남은 토큰: "
                   "{kept}개"),
    "path.top_p": ("   top-p {value}: the smallest set of most likely tokens whose probabilities sum to {value} or more "
                   "stays (nucleus sampling), divided again. {kept} tokens left:",
                   "   top-p {value}: 확률이 높은 토큰부터 더해 합이 {value} 이상이 되는 가장 작은 집합만 남기고"
                   "(nucleus sampling) 다시 나눕니다. 남은 토큰: {kept}개"),
    "path.rank": ("rank", "순위"),
    "path.chosen": ("The next token, drawn from the last distribution (seed {seed}): {token} (id {id}, p {p}), the "
                    "token generate.py --seed {seed} --max-new-tokens 1 writes after this one",
                    "마지막 분포에서 뽑은 다음 토큰 (seed {seed}): {token} (id {id}, p {p}). generate.py --seed {seed} "
                    "--max-new-tokens 1이 이 토큰 뒤에 쓰는 토큰입니다"),
    "path.hint": ("A map shows where a head looked, not why the output changed: a head need not have one fixed "
                  "meaning, and attention is a hint, not a causal explanation. To test what a head does, switch it "
                  "off (--ablate L.H, or its off switch in the live inspector) and compare.",
                  "attention map은 head가 어디를 봤는지 보여 줄 뿐, 출력이 왜 그렇게 나왔는지는 알려 주지 않습니다. head마다 정해진 의미가 있는 것은 아니고, "
                  "attention은 원인에 대한 설명이 아니라 단서입니다. head가 실제로 무슨 일을 하는지 확인하려면 그 head를 끄고(--ablate L.H, 실시간 검사기에서는 "
                  "head의 끄기 스위치) 비교해 보세요."),
    # ---- one text through the snapshots of a run (inspection/over_training.py) -------------------------
    "snapshots.title": ("wrote {path} ({n} snapshots, {T} tokens); the strongest heads at each step:",
                        "{path}에 저장했습니다 (snapshot {n}개, 토큰 {T}개). 각 step에서 가장 강한 head:"),
    "snapshots.columns": ("step|previous-token|induction|in-context loss drop", "step|이전 토큰|induction|in-context loss 감소"),
    "snapshots.page_title": ("{text}: {n} snapshots of {run}", "{text}: {run}의 snapshot {n}개"),
    # ---- generate.py's other lines ----------------------------------------------------------------------
    "maps.title": ("Attention maps of {ckpt}: {text}", "{ckpt}의 attention map: {text}"),
    "wrote": ("wrote {files}", "파일을 저장했습니다: {files}"),
    "score.title": ("scored {path} with {ckpt}: {chars} characters, {tokens} tokens",
                    "{path} 평가 (모델: {ckpt}): 글자 {chars}개, 토큰 {tokens}개"),
    "score.lines": ("token loss:           {loss} nats\nperplexity:           {ppl}\nbits per character:   {bpc}\n"
                    "characters per token: {cpt}",
                    "토큰당 loss:          {loss} nats\nperplexity:           {ppl}\n글자당 비트:          {bpc}\n"
                    "토큰당 글자 수:       {cpt}"),
    # ---- the heatmap PNGs (inspection/plot.py) ---------------------------------------------------------
    "plot.key": ("key token", "key 토큰"),
    "plot.query": ("query token", "query 토큰"),
    "plot.weight": ("attention", "attention 값"),
    "plot.layer": ("layer {layer}: attention per head (rows attend to columns)",
                   "layer {layer}: head별 attention (행 = query, 열 = key)"),
    "plot.layer_words": ("layer {layer}: attention per head by word (어절) (rows = query words, columns = key words; a "
                         "word's value is the sum over its tokens)",
                         "layer {layer}: head별 어절 단위 attention (행 = query 어절, 열 = key 어절; 어절의 값은 그 토큰들의 "
                         "값의 합)"),
    "plot.key_word": ("key word (어절)", "key 어절"),
    "plot.query_word": ("query word (어절)", "query 어절"),
    # ---- loss.png and heads.png (training/plots.py) -----------------------------------------------------
    "plots.logged": ("train (logged)", "학습 loss (기록)"),
    "plots.train": ("train (eval)", "학습 loss (평가)"),
    "plots.val": ("val (eval)", "검증 loss (평가)"),
    "plots.loss": ("loss (nats/token)", "loss (토큰당 nats)"),
    "plots.step": ("step", "step"),
    "plots.heads_title": ("head role scores at {n} evaluations ({seconds} s{share})",
                          "평가 {n}번에서 잰 head 역할 점수 ({seconds}초{share})"),
    "plots.of_run": (", {share} of the run", ", run의 {share}"),
    "plots.at": ("{head} at {step}", "{head} (step {step})"),
    "plots.passed": ("passed the bar: {heads}", "기준을 넘은 head: {heads}"),
    "plots.kept_off": ("kept off, no line: {heads}", "계속 끈 head(선 없음): {heads}"),
    "plots.drop": ("in-context loss\ndrop (nats)", "in-context loss\n감소 (nats)"),
    "plots.cost_loss": ("held-out loss\nadded off (nats)", "끄면 늘어나는\n검증 loss (nats)"),
    "plots.cost_drop": ("drop lost\noff (nats)", "끄면 줄어드는\nloss 감소 (nats)"),
    "plots.needed": ("needed (drop lost >= {bar} nats): {heads}", "필요해진 head (끄면 감소가 {bar} nats 이상 줄어듦): {heads}"),
    # ---- the offline page (inspection/page.html): plain {name} fields, filled in by the page ----------
    "page.watch_title": ("Watch the model learn", "모델이 배우는 모습 보기"),
    "page.watch_waiting": ("waiting for the run's first evaluation…", "run의 첫 evaluation을 기다리는 중…"),
    "page.watch_status": ("step {step} of {max}, evaluation {n}", "step {step} / {max}, evaluation {n}번째"),
    "page.watch_ended": ("the run ended at step {step}", "학습 종료: step {step}"),
    "page.watch_lost": ("the page cannot reach its server (the run ended, or the server stopped); it keeps what it saw",
                        "페이지가 서버에 닿지 않습니다(학습이 끝났거나 서버가 멈춤). 지금까지 본 것은 그대로 둡니다"),
    "page.watch_formed": ("{role} formed at step {step} (head {head})", "{role} head 형성: step {step} (head {head})"),
    "page.watch_not_formed": ("no {role} head yet (bar {bar})", "아직 {role} head 없음 (기준 {bar})"),
    "page.watch_loss": ("Loss, nats per token", "Loss, 토큰당 nats"),
    "page.watch_bpc": ("Held-out loss in bits per character", "검증 텍스트 loss, 글자당 bits"),
    "page.watch_logged": ("train (each log line)", "학습 (로그 줄마다)"),
    "page.watch_train": ("train (evaluation)", "학습 (evaluation)"),
    "page.watch_val": ("held-out", "검증"),
    "page.watch_roles": ("Role scores of every head over the steps (rows: layer.head; a dot: past the role's bar)",
                         "step에 따른 모든 head의 역할 점수 (행: layer.head, 점: 역할 기준을 넘음)"),
    "page.watch_costs": ("What switching each head off costs, at each evaluation that measured it",
                         "head를 하나씩 끌 때의 비용 (잰 evaluation마다)"),
    "page.watch_cost_loss": ("+loss off: held-out loss added, nats", "+loss(끔): 늘어난 검증 loss, nats"),
    "page.watch_cost_drop": ("-drop off: in-context loss drop taken away, nats",
                             "-감소(끔): 줄어든 in-context loss 감소폭, nats"),
    "page.watch_no_costs": ("not measured (train.head_costs)", "재지 않음 (train.head_costs)"),
    "page.watch_maps": ("Attention of the text at one evaluation (rows: query tokens, columns: key tokens)",
                        "한 evaluation에서 텍스트의 attention (행: query 토큰, 열: key 토큰)"),
    "page.watch_at": ("step {step}, evaluation {k} of {n}", "step {step}, evaluation {n}개 중 {k}번째"),
    "page.watch_no_maps": ("no maps yet: the weights of an evaluation are read as the run saves them",
                           "아직 map 없음: evaluation의 가중치는 run이 저장할 때 읽습니다"),
    "page.watch_text": ("Text", "텍스트"),
    "page.watch_show": ("Show", "보기"),
    "page.watch_reset": ("The lesson's text", "수업 텍스트"),
    "page.watch_sample": ("The run's sample at step {step}", "step {step}의 샘플"),
    "page.watch_columns": ("step|train loss|held-out loss|bits/char|in-context loss drop",
                           "step|학습 loss|검증 loss|글자당 bits|in-context loss 감소"),
    "page.watch_cell": ("head {head}, step {step}: {value}", "head {head}, step {step}: 값 {value}"),
    "page.language": ("Language", "언어"),
    "page.layer": ("Layer", "Layer"),
    "page.head": ("Head", "Head"),
    "page.layer_n": ("layer {n}", "layer {n}"),
    "page.head_n": ("head {n}", "head {n}"),
    "page.all_heads": ("all heads", "모든 head"),
    "page.decoding_step": ("Decoding step", "디코딩 단계"),
    "page.training_step": ("Training step", "학습 step"),
    "page.hint": ("Hover a token of the top line to see its attention; click any token or heatmap row to pin it "
                  "(click again to unpin) and to open the step-by-step walkthrough of that head at that query token.",
                  "맨 위 줄의 토큰에 마우스를 올리면 그 토큰의 attention이 보입니다. 토큰이나 heatmap의 행을 클릭하면 "
                  "고정되고(다시 클릭하면 풀림), 그 query 토큰에서 그 head의 계산을 단계별로 보여 줍니다."),
    "page.play": ("▶ play", "▶ 재생"),
    "page.pause": ("❚❚ pause", "❚❚ 멈춤"),
    "page.surprise_title": ("surprise {bits} bits (p {p}); the model expected: {expected}",
                            "놀라움 {bits}비트 (p {p}); 모델이 예상한 토큰: {expected}"),
    "page.surprise_note": ("Each token is coloured by its surprise, −log₂ p of that token given the ones before it: what "
                           "teacher forcing trains down (mean {mean} bits; the number under a token; hover it for what "
                           "the model expected there).",
                           "각 토큰의 색은 놀라움(surprise), 즉 앞 토큰들이 주어졌을 때 그 토큰의 −log₂ p입니다. teacher "
                           "forcing으로 학습하면 이 값이 줄어듭니다 (평균 {mean}비트, 토큰 아래 숫자; 마우스를 올리면 모델이 "
                           "그 자리에 예상한 토큰이 보입니다)."),
    "page.off_map": ("switched off: it still attends as drawn (grey), but W_O never sees what it mixes: {mode}",
                     "꺼진 head: attention은 그림(회색)대로 계산되지만, 그 결과는 W_O에 들어가지 않습니다. {mode}"),
    "page.overview_title": ("Every layer and head: where each query looks", "모든 layer와 head: 각 query가 보는 곳"),
    "page.overview_hint": ("Each picture draws every query's lines (left) to the keys it attends to (right), darker "
                           "for more attention: parallel lines one row down are a previous-token head, lines to the "
                           "token after an earlier copy an induction head. Click one to open it.",
                           "그림마다 모든 query(왼쪽)에서 그 query가 attention을 주는 key(오른쪽)로 선을 긋습니다. attention이 "
                           "클수록 진합니다. 한 줄씩 아래로 평행한 선은 이전 토큰 head, 앞에 나온 같은 토큰의 다음 토큰으로 "
                           "가는 선은 induction head입니다. 클릭하면 그 head가 열립니다."),
    # ---- the page's tour (inspection/tour.py, page/tour.js): a card's title "tour.KEY", its text "tour.KEY_text" ----
    "tour.start": ("Tour", "둘러보기"),
    "tour.count": ("{n} of {total}", "{total}장 중 {n}"),
    "tour.go_back": ("◀ Back", "◀ 이전"),
    "tour.go_next": ("Next ▶", "다음 ▶"),
    "tour.go_done": ("Done", "끝"),
    "tour.go_close": ("✕ Close", "✕ 닫기"),
    "tour.tokens": ("1. Tokens", "1. 토큰"),
    "tour.tokens_text": ("The text is cut into {T} tokens, each one of the model's {V} vocabulary entries; the "
                         "colour under each is how surprised the model was to see it. The token in red, {token} "
                         "(token {f}), is the one every picture below looks from.",
                         "텍스트는 토큰 {T}개로 나뉘고, 토큰 하나하나는 모델의 어휘 {V}개 중 하나입니다. 토큰 아래 색은 모델이 그 토큰을 보고 얼마나 "
                         "놀랐는지(surprise)입니다. 아래 그림들이 바라보는 자리는 빨간 테두리의 토큰입니다: 토큰 {f}, {token}."),
    "tour.embedding": ("2. Embedding",
                       "2. 임베딩(embedding)"),
    "tour.embedding_text": ("Each token becomes a vector of {C} numbers: its row of tok_emb plus the row of pos_emb for "
                            "its position. This sum is the residual stream every block reads and adds to.",
                            "토큰마다 숫자 {C}개짜리 벡터가 됩니다. tok_emb에서 그 토큰의 행과 pos_emb에서 그 위치의 행을 "
                            "더한 것입니다. 이 합이 residual stream이고, 모든 block이 이것을 읽고 여기에 더합니다."),
    "tour.qkv": ("3. Q, K and V",
                 "3. Q, K, V: 같은 stream의 세 투영"),
    "tour.qkv_text": ("Three projections of the same stream: each token's query q (what it looks for), key k (what it "
                      "offers) and value v (what it passes on). Head {head} of layer {layer} has vectors of d_k = {d} "
                      "numbers; the {H} heads share the {C} numbers of the stream.",
                      "같은 stream에 행렬 세 개를 곱해 토큰마다 query q(무엇을 찾는지), key k(무엇을 내놓는지), "
                      "value v(무엇을 넘겨줄지)를 만듭니다. layer {layer}의 head {head}에서 이 벡터들은 숫자 "
                      "d_k = {d}개이고, head {H}개가 stream의 숫자 {C}개를 나눠 씁니다."),
    "tour.scores": ("4. q·k: how well a key matches", "4. q·k: key가 얼마나 맞는지"),
    "tour.scores_text": ("The query of token {f} is compared with every key by a dot product q·k_j. Here the key it "
                         "matches best is token {j} {key_token}, with q·k = {dot}.",
                         "토큰 {f}의 query를 모든 key와 내적 q·k_j로 비교합니다. 여기서 가장 잘 맞는 key는 토큰 {j} {key_token}이고, q·k = "
                         "{dot}입니다."),
    "tour.scale": ("5. ÷√d_k, and why", "5. ÷√d_k를 하는 이유"),
    "tour.scale_text": ("A dot product of {d} numbers spreads about √d_k = {root} times wider than one product: here "
                        "the scores' spread is {before} before and {after} after the division. Without it softmax "
                        "would give the largest key {undivided} instead of {largest}: too sure, too early in "
                        "training.",
                        "숫자 {d}개의 내적은 곱 하나보다 약 √d_k = {root}배 넓게 퍼집니다. 여기서 score의 표준편차는 나누기 전 {before}, 나눈 뒤 "
                        "{after}입니다. 나누지 않으면 softmax가 가장 큰 key에 주는 값이 {largest}에서 {undivided}까지 올라가, 학습 초기부터 지나치게 "
                        "한쪽으로 쏠립니다."),
    "tour.mask": ("6. The mask, before softmax", "6. softmax 전에 mask"),
    "tour.mask_text": ("Token {f} may see {seen} keys, itself and those before it; the {masked} after it get −∞ "
                       "before softmax, so they get exactly 0 (the grey triangle of the map). Masking after softmax "
                       "would leave rows that do not sum to 1.",
                       "토큰 {f}의 query가 볼 수 있는 key는 자기 자신과 그 앞의 {seen}개뿐입니다. 뒤의 {masked}개는 softmax 전에 −∞가 되어 정확히 0을 "
                       "받습니다(map의 회색 삼각형). softmax 뒤에 mask하면 행의 합이 1이 되지 않습니다."),
    "tour.softmax": ("7. Softmax: a row sums to 1", "7. softmax: 한 행의 합은 1"),
    "tour.softmax_text": ("Softmax turns the scaled scores into attention weights w_j that sum to {sum}: a row of "
                          "the map. Token {f} gives its largest weight, {w}, to token {j} {key_token}.",
                          "softmax가 나눈 score를 합이 {sum}인 attention 값 w_j로 바꿉니다. 이것이 map의 한 행입니다. 토큰 {f}의 행에서 가장 큰 값은 "
                          "토큰 {j} {key_token}에 가는 {w}입니다."),
    "tour.values": ("8. y: the weighted sum of the values", "8. y: value의 가중합"),
    "tour.values_text": ("The head's output at token {f} is y = Σ_j w_j v_j, |y| = {y}: the lines show where the "
                         "weights go; its largest term makes {share}% of the mix.",
                         "토큰 {f}에서 head의 출력은 y = Σ_j w_j v_j이고 |y| = {y}입니다. 선은 가중치가 어디로 가는지 "
                         "보여 줍니다. 가장 큰 항이 전체의 {share}%를 차지합니다."),
    "tour.heads": ("9. Several heads, several relations", "9. 여러 head, 여러 관계"),
    "tour.heads_text": ("{L} layers of {H} heads each look for their own relation: the previous token, the first "
                        "token, a copy earlier in the text. Layer {layer}'s heads: {roles}.",
                        "layer {L}개에 head가 {H}개씩 있고, head마다 자기 관계를 찾습니다: 바로 앞 토큰, 첫 토큰, 앞에 "
                        "나온 같은 토큰. layer {layer}의 head: {roles}."),
    "tour.residual": ("10. W_O and the residual stream", "10. W_O와 residual stream"),
    "tour.residual_text": ("The heads' outputs side by side, times W_O, are added to the stream (|out| = {out} at token "
                           "{f}): a block adds to what it read instead of replacing it, so later blocks read everything "
                           "earlier ones wrote.",
                           "head들의 출력을 나란히 이어 W_O를 곱한 뒤 stream에 더합니다(토큰 {f}에서 |out| = {out}). "
                           "block은 읽은 것을 바꾸지 않고 거기에 더하므로, 뒤의 block은 앞의 block이 쓴 것을 모두 "
                           "읽습니다."),
    "tour.next": ("11. The next token", "11. 다음 토큰"),
    "tour.next_text": ("After the last block, ln_f and lm_head give one logit per vocabulary token; softmax, "
                       "temperature, top-k and top-p make the distribution the next token is drawn from. After token "
                       "{f} it drew {next} (p {p}). Move the settings and watch the bars.",
                       "마지막 block 뒤에 ln_f와 lm_head가 어휘의 토큰마다 logit 하나를 냅니다. softmax, temperature, top-k, top-p가 다음 "
                       "토큰을 뽑을 분포를 만듭니다. 토큰 {f} 다음으로 뽑힌 토큰: {next} (p {p}). 설정을 바꾸면서 막대를 보세요."),
    "tour.cache": ("12. The KV cache",
                   "12. KV cache: 생성할 때 다시 계산하지 않는 것"),
    "tour.cache_text": ("While generating, a new token needs only its own query: the keys and values of the tokens "
                        "before it do not change, so they are kept (2 × {L} layers × {H} heads × {T} tokens × {d} = "
                        "{cache} numbers here) and only the new token's row is computed.",
                        "생성할 때 새 토큰에는 자기 query만 필요합니다. 앞 토큰들의 key와 value는 바뀌지 않으므로 "
                        "저장해 두고(여기서는 2 × layer {L}개 × head {H}개 × 토큰 {T}개 × {d} = 숫자 {cache}개), 새 "
                        "토큰의 행만 계산합니다."),
    "tour.cost": ("13. T × T",
                  "13. T × T: 길이의 제곱"),
    "tour.cost_text": ("Every query meets every key: a map of {T} tokens holds {T} × {T} = {cells} numbers, and the "
                       "model makes {all} of them per text. Twice the text costs four times the maps: this is the "
                       "O(n²) of attention.",
                       "모든 query가 모든 key를 만납니다. 토큰 {T}개의 map에는 {T} × {T} = {cells}개의 값이 있고, "
                       "모델은 텍스트 하나에 이런 값을 {all}개 만듭니다. 텍스트가 두 배면 map은 네 배가 됩니다. 이것이 "
                       "attention의 O(n²)입니다."),
    "tour.test": ("14. A map is a hint: switch the head off to test it", "14. map은 단서일 뿐: head를 꺼서 확인하세요"),
    "tour.test_text": ("A map shows where a head looks, not what the model needs it for. Switching head "
                       "{layer}.{head} off adds {cost} nats of held-out loss per token: that is what it does for the "
                       "model. Try python generate.py --ablate {layer}.{head}.",
                       "map은 head가 어디를 보는지 보여 줄 뿐, 모델이 그 head를 무엇에 쓰는지는 말해 주지 않습니다. 이 head({layer}.{head})를 끄면 검증 "
                       "텍스트의 loss가 토큰당 {cost} nats 늘어납니다. 이것이 그 head가 모델에 하는 일입니다. 직접 해 보세요: python generate.py "
                       "--ablate {layer}.{head}"),
    "tour.test_text_unmeasured": ("A map shows where a head looks, not what the model needs it for. Switch head "
                                  "{layer}.{head} off and compare: python generate.py --ablate {layer}.{head} (and "
                                  "--heads for what switching each head off costs).",
                                  "map은 head가 어디를 보는지 보여 줄 뿐, 모델이 그 head를 무엇에 쓰는지는 말해 주지 않습니다. 이 "
                                  "head({layer}.{head})를 끄고 비교해 보세요: python generate.py --ablate {layer}.{head} "
                                  "(head를 하나씩 끌 때의 비용은 --heads)."),
    "page.stats_summary": ("Statistics of the heads shown", "보이는 head의 통계"),
    "page.roles_summary": ("Role scores and what switching each head off costs", "역할 점수와 head를 끌 때의 비용"),
    "page.lens_summary": ("Logit lens of the focused token", "초점 토큰의 logit lens"),
    "page.before_after": ("with every head on", "모든 head를 켰을 때"),
    "page.after": ("with {heads} off",
                   "끈 뒤: {heads}"),
    "page.loss_change": ("held-out loss, nats per token", "검증 텍스트 loss, 토큰당 nats"),
    "page.tokens": ("Tokens", "토큰"),
    "page.outgoing": ("Where the token attends (its row: query → keys)", "이 토큰이 보는 곳 (행: query → key)"),
    "page.incoming": ("What attends to the token (its column: queries → key)",
                      "이 토큰을 보는 토큰들 (열: query → key)"),
    "page.heatmaps": ("Heatmaps (rows = query tokens, columns = key tokens)", "Heatmap (행 = query 토큰, 열 = key 토큰)"),
    "page.token_title": ("token {i}: {token}", "토큰 {i}: {token}"),
    "page.cell": ("layer {layer} head {head}: query {q} {qt} → key {k} {kt}: {w}",
                  "layer {layer} head {head}: query {q} {qt} → key {k} {kt}: {w}"),
    "page.stats_columns": ("head|entropy|distance|prev|first|self|strongest role",
                           "head|엔트로피|거리|이전 토큰|첫 토큰|자기 자신|가장 강한 역할"),
    "page.roles_title": ("role scores{at} (held-out text, inspection/views/roles.py):",
                         "역할 점수{at} (검증 텍스트, inspection/views/roles.py):"),
    "page.roles_at": (" at step {step}", ": step {step} 시점"),
    "page.roles_columns": ("head|previous|first|self|duplicate|induction", "head|이전 토큰|첫 토큰|자기 자신|중복 토큰|induction"),
    "page.chance": ("chance", "우연"),
    "page.drop": ("in-context loss drop on repeated random tokens: {drop} nats ({first} on the first copy, {second} on "
                  "the second)",
                  "반복된 무작위 토큰에서 in-context loss 감소: {drop} nats (첫 번째 복사본 {first}, 두 번째 {second})"),
    "page.frame": ("step {step} ({n} of {total} snapshots)", "step {step} (snapshot {total}개 중 {n}번째)"),
    "page.prefill": ("prefill: tokens 0..{last} in one forward; the cache holds {keys} keys and their values{next}",
                     "prefill: 토큰 0..{last}, 한 번의 forward; cache에 key와 value {keys}쌍{next}"),
    "page.decode": ("step {step} of {steps}: token {last} “{token}” went in; its query, compared with the {keys} "
                    "cached keys, mixed their values{next}",
                    "{steps}단계 중 {step}단계: 토큰 {last} “{token}” 입력, 그 query가 cache된 key {keys}개와 비교하고 그 value들을 "
                    "섞습니다{next}"),
    "page.chose": (" and chose token {n} “{token}”", "; 다음 토큰: 토큰 {n} “{token}”"),
    "page.kv_title": ("The KV cache: what one decoding step computes", "KV cache: decoding 한 단계가 계산하는 것"),
    "page.kv_hint": ("While decoding, each step computes q, k and v of the new token only; the keys and values of the "
                     "earlier tokens are read from the cache, which grows a row per step. Move the decoding step above.",
                     "decoding 중에는 단계마다 새 토큰의 q, k, v만 계산합니다. 앞 토큰들의 key와 value는 cache에서 읽고, cache는 단계마다 "
                     "한 행씩 늘어납니다. 위의 decoding 단계를 움직여 보세요."),
    "page.kv_prefill": ("Layer {layer}, head {head}, prefill: K and V of tokens 0..{last} ({keys} rows) computed in one "
                        "forward.",
                        "layer {layer}, head {head}, prefill: 토큰 0..{last}의 K와 V({keys}행)를 한 번의 forward로 계산합니다."),
    "page.kv_step": ("Layer {layer}, head {head}, step {step}: token {last} “{token}” went in. Only its row of K and V "
                     "(red) and its query q are computed now; the rows above come from the cache, which now holds {keys}.",
                     "layer {layer}, head {head}, {step}단계: 토큰 {last} “{token}” 입력. 지금 계산하는 것은 이 토큰의 K, V 행(빨간 "
                     "테두리)과 query q뿐이고, 위의 행들은 cache에서 읽습니다. 지금 cache의 행 수: {keys}."),
    "page.kv_more": ("… and {n} earlier rows, in the cache too", "… 그 앞의 {n}행도 cache에 있습니다"),
    "page.kv_new": ("new: computed this step", "새 행: 이번 단계에서 계산"),
    "page.kv_prefilled": ("prefill: computed in one forward", "prefill: 한 번의 forward로 계산"),
    "page.path_title": ("The path of the focused token: from its id to the next token", "초점 토큰의 경로: id에서 다음 토큰까지"),
    "page.sampling_title": ("The next token after the text: move temperature, top-k and top-p",
                            "텍스트 다음에 올 토큰: temperature, top-k, top-p를 바꿔 보세요"),
    "page.bars": ("After the last token {token}: {kept} of {V} tokens keep a probability above 0; the 10 most "
                  "likely:",
                  "마지막 토큰 {token} 다음: 토큰 {V}개 중 {kept}개가 0보다 큰 확률을 가집니다. 확률이 가장 높은 10개:"),
    "page.bad_settings": ("temperature must be 0 or more, top-k 1 or more, top-p above 0 and at most 1",
                          "temperature는 0 이상, top-k는 1 이상, top-p는 0보다 크고 1 이하여야 합니다"),
    "page.lines": ("{name}: every query's lines (left) to the keys it attends to (right), a colour per head; token {i} "
                   "“{token}”'s drawn strong. Hover a token to follow it.",
                   "{name}: 모든 query(왼쪽)에서 그 query가 attention을 주는 key(오른쪽)로 그은 선, head마다 다른 색. 토큰 {i} "
                   "“{token}”의 선을 진하게 그렸습니다. 토큰에 마우스를 올려 따라가 보세요."),
    "page.legend": ("colour = attention:", "색 = attention 값:"),
    "page.legend_masked": ("masked (a later key)", "mask됨 (뒤의 key)"),
    "page.glossary": ("Glossary", "용어 풀이"),
    "page.path_click": ("Click the token to see its path (as you type, the page brings the last token's only).",
                        "토큰을 클릭하면 그 토큰의 경로가 보입니다(입력하는 동안에는 마지막 토큰의 경로만 가져옵니다)."),
    # ---- the live page (inspection/live.py) -----------------------------------------------------------
    "page.live_hint": ("Type a text: its maps, roles and next token follow as you type (Enter: at once). Generate "
                       "continues it, the maps following the cached decoding.",
                       "텍스트를 입력하면 입력하는 대로 map, 역할, 다음 토큰이 바뀝니다 (Enter를 누르면 즉시). [생성]을 누르면 "
                       "모델이 글을 이어 쓰고, map은 KV cache로 한 토큰씩 디코딩하는 과정을 따라갑니다."),
    "page.temperature": ("temperature", "temperature"),
    "page.top_k": ("top-k", "top-k"),
    "page.top_p": ("top-p", "top-p"),
    "page.max_new": ("new tokens", "새 토큰 수"),
    "page.seed": ("seed", "seed"),
    "page.generate": ("Generate", "생성"),
    "page.generating": ("generating…", "생성 중…"),
    "page.reconnecting": ("the server cannot be reached (stopped or restarting?); trying again every 2 s…",
                          "서버에 연결할 수 없습니다(멈췄거나 다시 시작하는 중인가요?). 2초마다 다시 시도합니다…"),
    "page.next": ("The next token (the top 10 with these settings):", "다음 토큰 (이 설정으로 상위 10개):"),
    "page.next_off": ("The next token with heads {heads} off: the whole model's top 10 kept (grey bars), then the "
                      "tokens new to the top",
                      "head를 끈 모델({heads})의 다음 토큰: 전체 모델의 상위 10개를 그대로 두고(회색 막대), 새로 상위에 오른 토큰을 뒤에 붙였습니다"),
    "page.held_out": ("held-out loss with those heads off: {loss} nats per token (full model {full}, {diff})",
                      "그 head를 끈 모델의 검증 텍스트 loss: 토큰당 {loss} nats (전체 모델 {full}, {diff})"),
    "page.off_switch": ("off", "끄기"),
    "page.timing": ("model {model} ms, drawing {draw} ms, {total} ms from the keystroke",
                    "모델 {model} ms, 그리기 {draw} ms, 키 입력부터 표시까지 {total} ms"),
    # ---- why this token (inspection/views/why.py) and patching (inspection/views/patch.py) --------------
    "why.title": ("Why {token} and not {versus} after token {i}: logit({token}) − logit({versus}) = {diff}, split "
                  "into what each part of the last residual stream adds to it directly (ln_f's scale σ held at its "
                  "computed {sigma})",
                  "토큰 {i} 다음에 왜 {versus}보다 {token}인가: logit({token}) − logit({versus}) = {diff}. 이 차이를 마지막 residual "
                  "stream의 각 부분이 직접 더한 몫으로 나눕니다(ln_f의 scale σ는 계산된 값 {sigma} 그대로)"),
    "why.exact": ("Held at its computed value, σ makes ln_f a linear map plus its bias, so the shares add up exactly "
                  "to the difference. But a share counts only what a part writes straight into the last stream: what "
                  "a head does through the heads and MLPs of later layers is counted in their shares, not in its "
                  "own. And removing a part would change σ too. So a share is not the effect of switching the part "
                  "off: --ablate and --patch measure that.",
                  "σ를 계산된 값으로 고정하면 ln_f는 선형 변환에 bias를 더한 것이 되어, 몫들의 합이 정확히 그 차이와 같습니다. 다만 몫은 각 부분이 마지막 stream에 직접 더한 "
                  "값만 셉니다: 한 head가 뒤 layer의 head나 MLP를 거쳐 미치는 효과는 그 뒤 부분들의 몫에 들어갑니다. 또 실제로 한 부분을 빼면 σ도 달라집니다. 그래서 몫은 "
                  "그 부분을 껐을 때의 효과가 아닙니다. 효과는 --ablate나 --patch로 확인하세요."),
    "why.part": ("part", "부분"),
    "why.share": ("share", "몫"),
    "why.up": ("pushes up", "올리는 토큰"),
    "why.down": ("pushes down", "내리는 토큰"),
    "why.rest": ("   … {n} more parts, {share} together", "   … 나머지 부분 {n}개, 합 {share}"),
    "why.sum": ("   the shares sum to {total}; the logit difference is {diff}", "   몫의 합 {total}, logit 차이 {diff}"),
    "why.meaning": ("A positive share pushes the first token of the difference (by default the model's choice) above "
                    "the second (the one it is compared with), a negative one the other way; a head's tokens pushed "
                    "up and down are what its output alone adds to every logit here. A share belongs to this text at "
                    "this token, not to the part: the same head pushes other tokens elsewhere. To test a part, "
                    "switch it off (--ablate) or patch it from another text (--patch).",
                    "몫이 양수면 logit 차이의 앞 토큰(기본은 모델이 고른 토큰)을 뒤 토큰(비교 대상)보다 위로 밀고, 음수면 그 반대입니다. head가 올리고 내리는 토큰은 그 "
                    "head의 출력만으로 여기서 각 logit에 더해지는 값으로 고른 것입니다. 몫은 그 부분의 성질이 아니라 이 텍스트의 이 토큰에서의 값입니다: 같은 head도 다른 "
                    "곳에서는 다른 토큰을 밉니다. 한 부분을 확인하려면 끄거나(--ablate) 다른 텍스트에서 patch해 보세요(--patch)."),
    "patch.title": ("The clean text predicts {token}; against {versus}, the logit difference is {clean} on "
                    "the clean text and {corrupt} on the corrupted one. Each cell puts one piece of the clean run "
                    "into the corrupted run at the same place and computes again: the share of the gap between the "
                    "two texts' differences that comes back, (patched − corrupted) / (clean − corrupted): 1 = all of "
                    "it, 0 = none, negative = pushed further toward the corrupted text's answer.",
                    "깨끗한 텍스트가 예측하는 다음 토큰: {token}. 비교 대상: {versus}. logit 차이: 깨끗한 텍스트 {clean}, 바꾼 텍스트 "
                    "{corrupt}. 각 칸은 깨끗한 run의 조각 하나를 바꾼 run의 같은 자리에 넣고 다시 계산했을 때, 두 텍스트의 logit 차이 사이 간격 중 되돌아온 "
                    "비율입니다: (patch 후 − 바꾼 텍스트) / (깨끗한 텍스트 − 바꾼 텍스트). 1 = 전부, 0 = 전혀, 음수 = 바꾼 텍스트의 답 쪽으로 더 밀림."),
    "patch.changed": ("the texts differ at tokens {tokens}; a row per stage of the residual stream, a column per "
                      "token:",
                      "두 텍스트가 다른 토큰: {tokens}. 행은 residual stream의 단계, 열은 토큰입니다:"),
    "patch.heads": ("each head alone, its output y at every token patched; the most recovered: {heads}",
                    "head 하나씩, 그 head의 출력 y를 모든 토큰에서 patch했을 때 되돌아온 비율이 큰 head: {heads}"),
    "patch.together": ("heads {heads} patched together: {share}", "함께 patch한 head {heads}: {share}"),
    "patch.cone": ("Why a cone: attention looks only back, so a stream changed at token t can change only the tokens "
                   "from t on, and a stream changed at one stage only the stages after it. Left of the first changed "
                   "token nothing comes back; at the last stage only the last token's stream is the prediction "
                   "itself.",
                   "원뿔(cone) 모양인 이유: attention은 앞만 보므로, 토큰 t에서 바뀐 stream은 t부터 뒤의 토큰만, 한 단계에서 바뀐 stream은 그 뒤 단계만 바꿀 수 "
                   "있습니다. 처음 바뀐 토큰보다 왼쪽에서는 아무것도 되돌아오지 않고, 마지막 단계에서는 마지막 토큰의 stream이 곧 예측입니다."),
    "patch.colour": ("share of the gap between the two logit differences recovered",
                     "되돌아온 비율 (두 logit 차이 사이 간격 중)"),
    "patch.png_title": ("clean text: {clean}\ncorrupted text: {corrupt}\nthe clean run's streams put into the "
                        "corrupted run: {token} against {versus}",
                        "깨끗한 텍스트: {clean}\n바꾼 텍스트: {corrupt}\n깨끗한 run의 stream을 바꾼 run에 넣기: {token} 대 {versus}"),
    "words.top": ("layer {layer} head {head} by word (어절): the words each query word attends to most (its tokens' "
                  "attention summed over the key word's tokens, averaged over its own). A word's value is a sum over "
                  "its tokens, so a word of more tokens gets more: under an even spread a word of 4 tokens gets 4 "
                  "times a word of 1. In brackets: the key word's tokens, and its value if the attention were spread "
                  "evenly.",
                  "layer {layer} head {head}, 어절 단위: 각 query 어절이 가장 많이 보는 어절 (key 어절의 토큰들에 준 attention 값을 더하고, query "
                  "어절의 토큰들로 평균). 어절의 값은 토큰 값의 합이라 토큰이 많은 어절일수록 커집니다(고르게 퍼진 attention에서도 토큰 4개인 어절은 1개인 어절의 4배). 괄호 "
                  "안은 key 어절의 토큰 수와, attention이 고르게 퍼졌을 때의 값입니다."),
    "words.sums": ("   by word (어절), the query token's attention summed over each word's tokens (in brackets: the "
                   "word's tokens, and its value under an even spread): {sums}",
                   "   어절 단위: 이 query 토큰이 각 어절의 토큰들에 준 attention 값의 합 (괄호 안: 어절의 토큰 수, 고르게 퍼졌을 때의 값): {sums}"),
    "words.value": ("{word} {value} (tokens: {n}, even: {even})",
                    "{word} {value} (토큰 {n}개, 고르게 {even})"),
    "page.words": ("read by word (어절)", "어절 단위로 보기"),
    "page.words_hint": ("Each word's attention: summed over the key word's tokens, averaged over the query word's "
                        "tokens. A word of more tokens gets more (under an even spread a word of 4 tokens gets 4 "
                        "times a word of 1): hover a word for its tokens and its value under an even spread. The "
                        "walkthrough, the path and the lens are per token.",
                        "어절마다의 attention 값: key 어절의 토큰들에 준 값을 더하고 query 어절의 토큰들로 평균했습니다. 토큰이 많은 어절일수록 값이 커집니다(고르게 퍼진 "
                        "attention에서도 토큰 4개인 어절은 1개인 어절의 4배). 어절에 마우스를 올리면 토큰 수와 고르게 퍼졌을 때의 값이 보입니다. 단계별 계산, 경로, "
                        "logit lens는 토큰 단위입니다."),
    "page.word_title": ("word {i}: {token} ({n} tokens); from the focused word: {value}, {even} under an even spread",
                        "어절 {i}: {token} (토큰 {n}개); 초점 어절에서 받는 값 {value}, 고르게 퍼졌을 때 {even}"),
    "page.why_title": ("Why this token: each part's direct share of the logit difference between the model's choice "
                       "and its runner-up",
                       "왜 이 토큰인가: 모델의 선택과 두 번째 후보의 logit 차이에서 각 부분이 직접 더한 몫"),
    "page.why_for": ("After token {i}: {token} against {versus}, logit difference {diff} (ln_f's scale σ held at its "
                     "computed {sigma}); the largest shares:",
                     "토큰 {i} 다음: {token} 대 {versus}, logit 차이 {diff} (ln_f의 scale σ는 계산된 값 {sigma} 그대로). 몫이 큰 부분:"),
    "page.why_heads": ("At the last token, what each head's output alone pushes up and down:",
                       "마지막 토큰에서, 각 head의 출력만으로 올리고 내리는 토큰:"),
    "page.patch_title": ("Patching: the clean text's streams put into the corrupted one",
                         "patching: 깨끗한 텍스트의 stream을 바꾼 텍스트에 넣기"),
    # ---- notes, warnings and the lines of train.py: plain text, the same numbers in both -------------------
    "warning": ("warning: {text}", "경고: {text}"),
    "note": ("note: {text}", "참고: {text}"),
    "cut": ("{what} has {n} tokens, more than the model's context of {block}; using the last {block}",
                   "{what}의 토큰이 {n}개로 모델의 context {block}개보다 많아, 마지막 {block}개만 씁니다"),
    "cut.prompt": ("the prompt", "prompt"),
    "cut.maps": ("the text for the attention maps", "attention map의 텍스트"),
    "note.kept_off": ("this run kept heads {heads} off from its first step (train.heads_off), {how}: they are off "
                      "here too",
                      "이 run은 head {heads:을} 첫 step부터 끈 채 학습했습니다(train.heads_off, {how}). 여기서도 꺼져 있습니다"),
    "kept_off.mean": ("each giving its mean output on held-out text as the run measured it",
                      "각 head는 run이 잰 검증 텍스트에서의 평균 출력을 냄"),
    "kept_off.zero": ("each giving zeros", "각 head는 영벡터를 냄"),
    "note.top_k": ("--top-k {k} keeps the whole vocabulary of {V} tokens: the same as no --top-k",
                   "--top-k {k}: 어휘 전체({V}개)를 남기므로 --top-k를 주지 않은 것과 같습니다"),
    "scoring": ("scoring", "평가 중"),
    "sample.head": ("--- sample {k} of {n} ---", "--- 샘플 {k} / {n} ---"),
    "serve.open": ("live inspector of {ckpt}: open {address} (Ctrl-C stops it)",
                   "{ckpt}의 실시간 검사기입니다. 브라우저로 여세요: {address} (Ctrl-C로 멈춥니다)"),
    "serve.stopped": ("stopped the live inspector", "실시간 검사기를 멈췄습니다"),
    "serve.host": ("--host {host}: the live inspector answers every machine that reaches this one (open "
                   "http://<this machine's address>:{port}/ there); it has no password, so serve it only on a "
                   "network you trust",
                   "--host {host}: 이 컴퓨터에 닿는 모든 컴퓨터에 실시간 검사기가 답합니다(그쪽에서 http://<이 컴퓨터의 주소>:{port}/를 엽니다). 비밀번호가 없으니 "
                   "믿을 수 있는 네트워크에서만 띄우세요"),
    "watch.open": ("live page of {run}: open {address} (it follows the run until it ends)",
                   "{run}의 실시간 학습 페이지입니다. 브라우저로 여세요: {address} (학습이 끝날 때까지 따라갑니다)"),
    "watch.open_runs": ("live page of {runs}: open {address} (Ctrl-C stops it)",
                        "{runs}의 실시간 학습 페이지입니다. 브라우저로 여세요: {address} (Ctrl-C로 멈춥니다)"),
    "watch.ended": ("the live page stopped with the run; see it again: python generate.py --watch {run}",
                    "학습이 끝나 실시간 페이지도 멈췄습니다. 다시 보려면: python generate.py --watch {run}"),
    "watch.stopped": ("stopped the live page", "실시간 학습 페이지를 멈췄습니다"),
    "page.big": ("{page} is {mb} MB and may load slowly; keep fewer layers with --layers (for example --layers "
                 "0,{last})",
                 "{page}: 크기가 {mb} MB라 느리게 열릴 수 있습니다. --layers로 layer를 줄이세요(예: --layers 0,{last})"),
    "data.same_val": ("data.val_source holds the same text as data.source: the held-out loss and bits/char then score "
                      "text the model trained on, and measure memory, not learning; give a text kept out of the training",
                      "data.val_source가 data.source와 같은 텍스트입니다. 그러면 검증 loss와 글자당 비트는 모델이 학습한 텍스트를 재므로 "
                      "배운 정도가 아니라 외운 정도를 보여 줍니다. 학습 텍스트와 겹치지 않는 검증 텍스트를 주세요"),
    "corpus.download": ("corpus {name}: downloading the package {package} with apt-get",
                        "코퍼스 {name}: apt-get으로 {package} 패키지를 내려받습니다"),
    "corpus.built": ("corpus {name}: {documents} documents, {chars} characters, {hangul} of the letters Hangul -> "
                     "{out} ({how})",
                     "코퍼스 {name}: 문서 {documents}개, {chars}자, 글자 중 한글 {hangul} -> {out} ({how})"),
    "corpus.reused": ("reused", "재사용"),
    "corpus.made": ("built from {package} {version} in {seconds} s", "{package} {version}에서 {seconds}초 만에 만듦"),
    "train.data": ("data: {name} -> {out} ({how} in {seconds} s)", "데이터: {name} -> {out} ({seconds}초 만에 {how})"),
    "train.data_reused": ("reused", "재사용"),
    "train.data_built": ("built", "준비"),
    "train.split": ("  {part:6} {documents} documents, {chars} characters, {tokens} tokens, {cpt} characters/token "
                    "-> {path}",
                    "  {part:6} 문서 {documents}개, 글자 {chars}개, 토큰 {tokens}개, 토큰당 글자 {cpt}개 -> {path}"),
    "train.tokenizer": ("  tokenizer: vocab size {V}{note} -> {path}", "  토크나이저: 어휘 크기 {V}{note} -> {path}"),
    "train.tokenizer_fewer": (" (of {asked} asked: the corpus has no more merges)",
                              " (요청한 {asked}개 중: 코퍼스에 merge가 더 없습니다)"),
    "train.tokenizer_jamo": (", BPE over jamo (초성·중성·종성, data.unit = \"jamo\")",
                             ", 자모(초성·중성·종성) 단위 BPE (data.unit = \"jamo\")"),
    "train.tokenizer_from": (" (from {origin}, documents separated by {eot})", " ({origin}의 것, 문서 구분: {eot})"),
    "train.summary": ("{params}M parameters on {device}, {precision}, compile {compile}, {world} process(es), "
                      "{tokens} tokens/step{resuming}",
                      "parameter {params}M개, {device}, {precision}, compile {compile}, process {world}개, step당 토큰 "
                      "{tokens}개{resuming}"),
    "train.resuming": ("; resuming at step {step}", "; step {step}부터 이어서 학습"),
    "train.starting_from": ("starting from {origin} ({positions} positions, {kept} kept)",
                            "{origin}에서 시작합니다 (위치 {positions}개 중 {kept}개 사용)"),
    "train.eval": ("step {step}: train loss {train}, val loss {val}{best}",
                   "step {step}: 학습 loss {train}, 검증 loss {val}{best}"),
    "train.best": (" (best)", " (최고 기록)"),
    "train.plan": ("plan: {steps} steps fit in train.time_budget = {budget} ({seconds} s a step lately, evaluations "
                   "included)",
                   "계획: train.time_budget = {budget} 안에 {steps} step이 들어갑니다 (최근 step당 {seconds}초, 평가 포함)"),
    "train.stopped": ("stopped at step {step}; saved {path}; resume with: {command}",
                      "step {step}에서 멈췄습니다. {path}에 저장했습니다. 이어서 학습하려면: {command}"),
    "train.stop_patience": ("no better {what} in {evals} evaluations since step {best} (best/)",
                            "{what}: step {best}(best/) 이후 평가 {evals}번 동안 나아지지 않았습니다"),
    "train.best_by.val_loss": ("val loss",
                               "검증 loss"),
    "train.best_by.copy_loss": ("copy loss (the second copy of repeated random tokens)",
                                "복사본 loss (반복된 무작위 토큰의 두 번째 복사본)"),
    "train.stop_saved": (", about {minutes} minutes of train.time_budget", ", train.time_budget 중 약 {minutes}분"),
    "train.stop": ("early stop: {why}; stopped at step {step} of {planned} planned{saved}",
                   "조기 종료: {why}; 계획한 {planned} step 중 step {step}에서 멈췄습니다{saved}"),
    "train.final": ("whole validation split ({tokens} tokens, {chars} characters): best weights ({best_dir}, step "
                    "{best_step}) {best_bpc} bits/char, last ({last_dir}, step {step}) {bpc} bits/char{speed}",
                    "검증 텍스트 전체 (토큰 {tokens}개, 글자 {chars}개): best 가중치 ({best_dir}, step {best_step}) {best_bpc} "
                    "bits/char, last ({last_dir}, step {step}) {bpc} bits/char{speed}"),
    "train.final_speed": ("; {tokens_per_s} tokens/s", "; 초당 토큰 {tokens_per_s}개"),
    "train.circuit": ("{previous}, induction {induction} at layer {ilayer} head {ihead}, in-context loss drop "
                      "{drop} nats",
                      "{previous}, induction {induction} (layer {ilayer} head {ihead}), in-context loss 감소 {drop} "
                      "nats"),
    "train.circuit_previous": ("previous-token {score} at layer {layer} head {head}",
                               "이전 토큰 {score} (layer {layer} head {head})"),
    "train.circuit_no_layer": ("no layer below for a previous-token head", "이전 토큰 head가 들어갈 아래 layer가 없음"),
    "train.heads_formed": ("heads of {where}: {circuit}; see them with: python generate.py --ckpt {run} --heads",
                           "{where}의 head: {circuit}; 보려면: python generate.py --ckpt {run} --heads"),
    "train.heads_last": ("heads of {where}: no copying circuit, but last/ (step {step}) has one; see it with: "
                         "python generate.py --ckpt {last} --heads",
                         "{where}의 head: 복사 회로가 없지만 last/(step {step})에는 있습니다; 보려면: python generate.py --ckpt "
                         "{last} --heads"),
    "train.heads_none": ("heads of {where}: no copying circuit formed: {circuit}, where a circuit needs a "
                         "previous-token score of {bar}, an induction score of {bar} and an in-context loss drop of "
                         "{drop} nats{advice}",
                         "{where}의 head: 복사 회로가 생기지 않았습니다: {circuit}. 회로로 보려면 이전 토큰 점수 {bar}, induction 점수 {bar}, "
                         "in-context loss 감소 {drop} nats 이상이어야 합니다{advice}"),
    "train.heads_advice": ("; try another --train.seed, or more --train.max_steps",
                           "; 다른 --train.seed나 더 많은 --train.max_steps로 해 보세요"),
    "train.where_best": ("best/ (step {step})", "best/ (step {step})"),
    "train.auto": ("auto: {settings} ({why})", "auto: {settings} ({why})"),
    "train.auto_fit": ("{steps} steps fit in {budget} at {seconds} s a step (timed; planned again at each evaluation)",
                       "{budget} 안에 step당 {seconds}초로 {steps} step이 들어갑니다 (실측으로 계획하고 평가마다 다시 계획)"),
    "train.auto_passes": ("{steps} steps x {tokens} tokens = {epochs} passes over {train_tokens} training tokens",
                          "{steps} step x 토큰 {tokens}개 = 학습 토큰 {train_tokens}개를 {epochs}번 지나감"),
    "train.auto_eval": ("an evaluation every {every} steps, about {share} of the time on this GPU",
                        "평가는 {every} step마다 한 번: 이 GPU에서 전체 시간의 약 {share}"),
    "train.auto_compile_failed": ("compile off: the trial compilation failed", "compile off: 시험 컴파일이 실패했습니다"),
    "train.auto_compile": ("compile {choice}: {gain}x the steps, {compiled} s a compiled step against {eager} after "
                           "{first} s of compilation (timed)",
                           "compile {choice}: step 수 {gain}배, 컴파일한 step {compiled}초 대 eager {eager}초, 컴파일 {first}초 "
                           "(실측)"),
    "train.compile_step_failed": ("torch.compile failed at the first step ({error}: {detail}), so the run goes on "
                                  "eager (train.compile = false skips the attempt)",
                                  "첫 step에서 torch.compile이 실패했으므로({error}: {detail}) run은 eager로 계속합니다"
                                  "(train.compile = false면 시도하지 않습니다)"),
    "train.bf16_resumed_as_fp16": ("this run trained in bf16, which {device} ({name}) only emulates, slowly and "
                                   "without fused attention: it goes on in fp16 with a loss scaler (train.dtype = "
                                   "bf16 keeps bf16)",
                                   "이 run은 bf16으로 학습했지만 이 장치({device}, {name})는 bf16을 흉내만 내서 느리고 fused "
                                   "attention도 없으므로, loss scaler와 함께 fp16으로 이어서 학습합니다(train.dtype = "
                                   "bf16이면 그대로 유지합니다)"),
    "train.bf16_emulated": ("train.dtype = bf16, which {device} ({name}) only emulates: steps are slow, and without "
                            "fused attention every (T, T) attention map of a batch stays in memory (auto takes fp16 "
                            "there)",
                            "train.dtype = bf16이지만 이 장치({device}, {name})는 이를 흉내만 냅니다. step이 느리고, fused "
                            "attention이 없어 batch의 (T, T) attention map이 모두 메모리에 남습니다(auto는 여기서 "
                            "fp16을 씁니다)"),
    "train.compile_failed": ("torch.compile failed in the trial ({error}), so the run stays eager",
                             "시험 실행에서 torch.compile이 실패해({error}) eager로 학습합니다"),
    "train.ranks": ("{saved} processes saved this run, {world} resume it: from step {step} each draws new batches "
                    "and dropout masks, not those of the run's first steps again, so the run differs from one that "
                    "kept {saved}",
                    "이 run을 저장한 process는 {saved}개, 이어서 학습하는 process는 {world}개입니다. step {step}부터 "
                    "각 process가 처음 step들의 batch와 dropout mask를 되풀이하지 않고 새로 뽑으므로, process {saved}개로 "
                    "계속한 run과는 달라집니다"),
    "train.damaged": ("{path} had {n} damaged lines; they were dropped",
                      "{path}에 손상된 줄이 {n}개 있어 건너뛰었습니다"),
    "train.damaged_one": ("{path} had {n} damaged line; it was dropped",
                          "{path}에 손상된 줄이 {n}개 있어 건너뛰었습니다"),
    "train.note_budget": ("train.time_budget = {budget} is not used: train.max_steps = {steps} is a number of "
                          "steps, run whatever they take (max_steps = \"auto\" fits the steps to the budget)",
                          "train.time_budget = {budget}: 쓰이지 않습니다. train.max_steps = {steps}: step 수라 걸리는 시간과 상관없이 "
                          "다 돌립니다(max_steps = \"auto\"이면 예산에 맞춰 step 수를 정합니다)"),
    "train.note_snapshots": ("train.snapshots = {snapshots}, but the planned {n} evaluations take at most one "
                             "snapshot each: the run keeps at most {n}",
                             "train.snapshots = {snapshots}: 계획한 평가 {n}번은 평가마다 snapshot을 하나만 남기므로, 많아야 {n}개를 남깁니다"),
    "train.note_warmup": ("train.warmup_steps = {warmup} is not below the {steps} steps: the learning rate climbs "
                          "the whole run (to train.lr {lr} at most at its last step) and never decays",
                          "train.warmup_steps = {warmup}: 전체 {steps} step보다 작지 않아서, 학습률이 run 내내 오르기만 하고(마지막 step에서 "
                          "많아야 train.lr {lr}) 줄어들지 않습니다"),
    "train.note_eval": ("train.eval_interval = {interval} is past the {steps} steps: one evaluation, at the last "
                        "step, so best/ is last/",
                        "train.eval_interval = {interval}: 전체 {steps} step보다 커서 마지막 step에서 한 번만 평가하므로 best/가 "
                        "last/입니다"),
    "train.note_patience": ("train.patience = {patience} can never stop the run: it makes {n} evaluations",
                            "train.patience = {patience}: 평가가 {n}번뿐이라 이 값으로는 run이 멈추지 않습니다"),
    "train.note_sample": ("train.sample_tokens = {sample} is past model.block_size {block}: the sample's later "
                          "tokens see only its last {half} (a sliding window)",
                          "train.sample_tokens = {sample}: model.block_size {block}보다 커서, 샘플의 뒤쪽 토큰은 마지막 {half}개만 "
                          "봅니다(sliding window)"),
}


# the particles a field may name, `{value:을}`: the form after a final consonant, and after a vowel
PARTICLES = {"은": ("은", "는"), "이": ("이", "가"), "을": ("을", "를"), "과": ("과", "와"), "으로": ("으로", "로")}
RIEUL = 8  # ㄹ's index among the final consonants: after it (으)로 is 로, as after a vowel
DIGIT_FINALS = [21, 8, 0, 16, 0, 0, 1, 8, 8, 0]  # the final consonant of 영 일 이 삼 사 오 육 칠 팔 구
PLACE_FINALS = {1: 17, 2: 1, 3: 4}  # 십 (ㅂ), 백 (ㄱ), 천 (ㄴ); from 4 zeros on: 만 (ㄴ), 억 (ㄱ), 조 (none)
LETTER_FINALS = {"l": RIEUL, "r": RIEUL, "m": 16, "n": 4}  # 엘, 알, 엠, 엔; every other letter's name ends on a vowel


def final_consonant(text: str) -> int | None:
    """The final consonant of `text` as Korean reads it aloud (0: none, a vowel; else its index, ㄹ = 8), or None
    when it cannot tell. Closing quotes and brackets are not read, nor a parenthesis at the end ('한다'(id 5) is read
    as 한다); a number is read in Korean (10 십, 0.6456 ... 육, 1,000 천, 12% 퍼센트), a Latin letter by its name."""
    text = text.rstrip()
    while True:
        stripped = re.sub(r"\s*\([^()]*\)$", "", text).rstrip().rstrip("'\"’”」』]>").rstrip()
        if stripped == text:
            break
        text = stripped
    if not text:
        return None
    last = text[-1]
    if "가" <= last <= "힣":
        return (ord(last) - ord("가")) % 28
    if last == "%":
        return 0  # 퍼센트
    if last.isascii() and last.isalpha():
        return LETTER_FINALS.get(last.lower(), 0)
    number = re.search(r"(\d[\d,]*)(\.\d+)?$", text)
    if number is None:
        return None
    if number.group(2):  # decimals are read digit by digit
        return DIGIT_FINALS[int(number.group(2)[-1])]
    digits = number.group(1).replace(",", "")
    zeros = len(digits) - len(digits.rstrip("0"))
    if zeros == 0 or zeros == len(digits):  # 7: 칠; 0: 영
        return DIGIT_FINALS[int(digits[-1])]
    if zeros < 4:
        return PLACE_FINALS[zeros]
    return {0: 4, 1: 1, 2: 0}.get((zeros - 4) // 4, 0)  # 만, 억, 조


def particle(text: str, which: str) -> str:
    """The particle `which` (a key of PARTICLES: 은, 이, 을, 과, 으로) as it follows `text`: 을 after '법률', 를 after
    '한다'; both forms, 을(를), when the last sound cannot be told."""
    after_consonant, after_vowel = PARTICLES[which]
    final = final_consonant(text)
    if final is None:
        return f"{after_consonant}({after_vowel})"
    if which == "으로":
        return after_vowel if final in (0, RIEUL) else after_consonant
    return after_vowel if final == 0 else after_consonant


class ParticleFormatter(string.Formatter):
    """str.format, where a field `{name:을}` is the value followed by the particle its last sound takes."""

    def format_field(self, value, format_spec: str) -> str:
        if format_spec in PARTICLES:
            text = format(value)
            return text + particle(text, format_spec)
        return super().format_field(value, format_spec)


FORMATTER = ParticleFormatter()


def locale_language() -> str:
    """"ko" when the locale is Korean (the first of LC_ALL, LC_MESSAGES, LANG that is set is "ko" or "ko_...",
    with or without ".encoding" or "@modifier"; not "kok_IN", Konkani), else "en"."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "ko" if re.match(r"ko(?:[_.@]|$)", value, re.IGNORECASE) else "en"
    return "en"


# The terminal's language: every line a command prints, its warnings and notes included, is said in it. The command
# sets it once where it starts (--lang; a notebook's nb.language), so that no function below it, the ones that
# compute the numbers least of all, takes a language; a view's text, the page and the pictures are given theirs.
TERMINAL = {"lang": None}  # None: the locale's (locale_language)


def check_language(lang) -> str:
    """`lang` if it is one of LANGUAGES, else one UserError naming the argument (a notebook's lang="fr")."""
    if lang not in LANGUAGES:
        raise ArgumentValueError(f"lang = {lang!r} is not one of {', '.join(map(repr, LANGUAGES))}")
    return lang


def use_language(lang: str | None) -> None:
    """Say every line printed from now on in `lang` ("en" or "ko"; None: the locale's again)."""
    TERMINAL["lang"] = None if lang is None else check_language(lang)


def messages(lang: str | None = None):
    """say(key, **fields) -> the text of `key` in `lang` ("en" or "ko"; None: the terminal's, `use_language`, else the
    locale's), fields filled in. Any other `lang` is one UserError naming the argument (`check_language`)."""
    index = LANGUAGES.index(check_language(lang or TERMINAL["lang"] or locale_language()))

    def say(key: str, **fields) -> str:
        return FORMATTER.format(MESSAGES[key][index], **fields)

    return say


def fields_of(text: str) -> list[str]:
    """The {fields} a text takes, in order (what tests/test_messages.py compares between the languages)."""
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


def page_messages() -> dict[str, list[str]]:
    """The texts the page needs, both languages: {key: [en, ko]}."""
    return {key: list(texts) for key, texts in MESSAGES.items()
            if key.startswith(("page.", "role.", "roles.off", "roles.word_columns", "lens.", "ablate.", "path.",
                               "explain.", "stats.defs", "why.", "patch.", "tour."))}
