"""Every teaching text of the inspection tools, in English and in Korean: one table, looked up by key.

    say = messages("ko")                                  # "en", "ko", or None: the locale's (`locale_language`)
    say("explain.step4", d=16, C=64, H=4, root="4.0000")  # one text, its {fields} filled in

Korean follows the explainers Korean learners read: Korean sentences, with the technical terms in the form
they are used in (query, key, value, score, softmax, √d_k, mask, head, token, residual stream, ...), and
every number and formula as in English. Both versions of a text take the same {fields} and carry the same
literal numbers (tests/test_messages.py checks it), so a walkthrough in Korean shows exactly the numbers
of the English one. The `page.*` and `role.*` texts go into the offline page, which switches language in
place; their fields are plain `{name}`s (the page fills them in with JavaScript). Error messages stay English.
"""

import os
import re
import string

LANGUAGES = ("en", "ko")

MESSAGES: dict[str, tuple[str, str]] = {
    # ---- the roles of inspection/heads.py -----------------------------------------------------------
    "role.previous-token": ("previous-token", "이전 토큰"),
    "role.first-token": ("first-token", "첫 토큰"),
    "role.self": ("self", "자기 자신"),
    "role.duplicate-token": ("duplicate-token", "중복 토큰"),
    "role.induction": ("induction", "induction"),
    "role.mixed": ("mixed", "혼합"),
    "roles.header": ("rank layer head  strongest role", "순위 layer head  가장 강한 역할"),
    "roles.columns": ("previous|first|self|duplicate|induction", "이전 토큰|첫 토큰|자기 자신|중복 토큰|induction"),
    "roles.chance": ("chance (an even spread)", "우연 수준 (고르게 퍼진 attention)"),
    "roles.sequences": (
        "induction sequences ({count} x 2 copies of {n} random tokens): loss {first} nats on the first copy, "
        "{second} on the second (drop {drop})",
        "induction 시퀀스 (무작위 토큰 {n}개를 2번 반복, 시퀀스 {count}개): 첫 번째 복사본의 loss {first} nats, "
        "두 번째 복사본 {second} (감소 {drop})"),
    "score.ablated": ("with heads {heads} off: {diff} bits/char against the full model's {full}",
                      "head {heads}를 끄면: 전체 모델의 {full}보다 {diff} bits/char"),
    "roles.off_columns": ("+loss off|-drop off", "끄면 +loss|끄면 -감소"),
    "roles.off": ("off: each head switched off alone ({mode}): +loss = the held-out loss it adds, in nats per token "
                  "(full model {loss}); -drop = the in-context loss drop it takes away (full model {drop})",
                  "끄면: head 하나씩 끄고 잰 값({mode}): +loss = 검증 텍스트의 loss가 토큰당 늘어난 nats (전체 모델 "
                  "{loss}); -감소 = in-context loss 감소에서 줄어든 만큼 (전체 모델 {drop})"),
    "ablate.mean": ("its output replaced by its mean on held-out text", "출력을 검증 텍스트에서의 평균으로 바꿈"),
    "ablate.zero": ("its output replaced by zeros", "출력을 영벡터로 바꿈"),
    "roles.title": ("what each head does (inspection/heads.py defines the scores), on {where}:",
                    "각 head가 하는 일 (score의 정의: inspection/heads.py), 측정한 텍스트: {where}:"),
    "where.file": ("{path} ({n} tokens)", "{path} (토큰 {n}개)"),
    "where.validation": ("the run's validation split {path} ({n} tokens)", "학습 때 떼어 둔 검증 데이터 {path} (토큰 {n}개)"),
    "where.sampled": ("{n} tokens the model wrote itself (seed 0, temperature 1): no validation split found for {ckpt}",
                      "모델이 스스로 쓴 토큰 {n}개 (seed 0, temperature 1; {ckpt}의 검증 데이터가 없어 대신 사용)"),
    # ---- per-head statistics (inspection/stats.py) ----------------------------------------------------
    # ---- the logit lens (inspection/lens.py) and switched-off heads (model/ablation.py) ------------------
    "lens.title": ("logit lens at token {query}: the next token after each stage, through ln_f and the tied head "
                   "(the model's choice: {choice})",
                   "logit lens, 토큰 {query}: 각 단계의 residual stream을 ln_f와 tied head에 통과시킨 다음 토큰 "
                   "(모델의 선택: {choice})"),
    "lens.embeddings": ("token + position embeddings", "토큰 + 위치 embedding"),
    "lens.block": ("after block {layer}", "block {layer} 뒤"),
    "lens.output": (" = output", " = 출력"),
    "lens.rank": ("rank {rank}", "순위 {rank}"),
    "stats.title": ("attention statistics per head over {n} tokens (inspection/stats.py defines them):",
                    "head별 attention 통계, 토큰 {n}개 (정의: inspection/stats.py):"),
    "stats.columns": ("layer|head|entropy|distance|prev|first|self", "layer|head|엔트로피|거리|이전 토큰|첫 토큰|자기 자신"),
    "stats.top": ("layer {layer} head {head}: the tokens each query attends to most",
                  "layer {layer} head {head}: 각 query가 가장 많이 보는(attention 값이 가장 큰) 토큰"),
    # ---- the walkthrough of one head at one query (inspection/explain.py) ------------------------------
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
    "explain.step34": ("3. Scores q·k_j.  4. Divided by √d_k, d_k = {d} (n_embd / n_head = {C} / {H}): √{d} = {root}, "
                       "which keeps their spread from growing with d_k.",
                       "3. score q·k_j.  4. √d_k로 나누기, d_k = {d} (n_embd / n_head = {C} / {H}): √{d} = {root}. "
                       "이렇게 나누면 d_k가 커져도 score가 퍼지는 폭이 커지지 않습니다."),
    "explain.step56": ("5. Masked: a key after the query gets -∞, so its attention is 0.  6. Softmax: w_j = exp(s_j) / "
                       "Σ exp(s), over the row.",
                       "5. mask: query보다 뒤에 있는 key의 score는 -∞가 되어 w_j가 0이 됩니다.  6. softmax: 한 행 안에서 "
                       "w_j = exp(s_j) / Σ exp(s)."),
    "explain.more_masked": ("    …  and {n} more later keys, all masked: -∞, w_j = 0",
                            "    …  그리고 뒤의 key {n}개, 모두 mask: -∞, w_j = 0"),
    "explain.largest": ("   the largest terms w_j v_j (by norm w_j |v_j|):", "   가장 큰 항 w_j v_j (norm w_j |v_j| 기준):"),
    "explain.step8": ("8. Where y goes: its {d} values become dims {lo}..{last} of the {C}-vector that concatenates the "
                      "outputs of all {H} heads at token {i}; that vector times W_O ({C} x {C}) plus b_O is",
                      "8. y가 가는 곳: y의 값 {d}개는 토큰 {i}에서 head {H}개 모두의 출력을 이어 붙인 {C}차원 벡터의 "
                      "{lo}..{last}번째 차원이 되고, 그 벡터에 W_O ({C} x {C})를 곱하고 b_O를 더한 결과는 다음과 같습니다:"),
    "explain.share": ("   of which this head's share y W_O[{lo}:{end}] = {share}   |share| = {norm}",
                      "   그중 이 head의 몫 y W_O[{lo}:{end}] = {share}   |share| = {norm}"),
    "explain.residual": ("   out_{i} is added to the residual stream (resid_{i} + out_{i}){mlp}.",
                         "   out_{i}: 이 값이 residual stream에 더해집니다 (resid_{i} + out_{i}){mlp}."),
    "explain.mlp_follows": (", and the block's MLP follows", ". 이어서 같은 block의 MLP가 계산됩니다"),
    "explain.why_qkv": ("   q is what the query (token {i}) looks for, k_j how token j is found, v_j what token j hands over "
                        "when it is looked at: where to look (q·k) is kept apart from what is carried (v).",
                        "   q는 query(토큰 {i}) 쪽에서 찾는 것, k_j는 토큰 j가 찾아지는 방식, v_j는 토큰 j를 볼 때 넘겨받는 "
                        "내용입니다. 어디를 볼지(q·k)와 무엇을 가져올지(v)가 따로 계산됩니다."),
    "explain.why_scale": ("   Why divide: q·k_j is a sum of {d} products, so its spread grows with d_k. Over the visible keys "
                          "the scores' standard deviation is {before} before dividing and {after} after. The largest "
                          "attention: {largest} with the division, {undivided} without it. Undivided, larger heads push "
                          "softmax towards one key (it saturates), and the other keys get almost no gradient.",
                          "   나누는 이유: q·k_j는 곱 {d}개의 합이라 d_k가 커질수록 퍼지는 폭이 커집니다. 볼 수 있는 "
                          "key들에서 score의 표준편차는 나누기 전 {before}, 나눈 뒤 {after}입니다. 가장 큰 attention "
                          "값: 나누면 {largest}, 나누지 않으면 {undivided}. 나누지 않으면 head가 클수록 softmax가 한 key로 "
                          "쏠리고(포화), 다른 key로는 gradient가 거의 흐르지 않습니다."),
    "explain.why_mask": ("   Why mask before softmax: exp(-∞) = 0, so a later key gets exactly 0 and the visible keys' "
                         "attention still sums to 1 (Σ w_j above); masking after softmax would leave a row that does "
                         "not.",
                         "   softmax 전에 mask하는 이유: exp(-∞) = 0이므로 뒤의 key는 정확히 0을 받고, 볼 수 있는 key들의 "
                         "attention 값은 그대로 합이 1입니다(위의 Σ w_j). softmax 뒤에 mask하면 한 행의 합이 그보다 "
                         "작아집니다."),
    "explain.why_mix": ("   y mixes every visible value; it is not a copy of the strongest: the largest term w_j |v_j| is "
                        "{share}% of Σ_j w_j |v_j|.",
                        "   y는 가장 강한 value 하나를 복사한 것이 아니라 볼 수 있는 모든 value를 섞은 것입니다: 가장 큰 "
                        "항 w_j |v_j|는 Σ_j w_j |v_j|의 {share}%입니다."),
    "explain.why_heads": ("   Why several heads: each has its own W_Q, W_K and W_V, so each can look for something else, "
                          "and W_O mixes their outputs. Each head's |share| of out at this token: {shares}.",
                          "   head가 여러 개인 이유: head마다 W_Q, W_K, W_V가 따로 있어 서로 다른 것을 찾을 수 있고, W_O가 "
                          "그 출력들을 섞습니다. 이 토큰에서 out에 대한 head별 |share|: {shares}."),
    # ---- the path of one token through the whole forward pass (inspection/path.py) ---------------------
    "path.title": ("The path of token {i} {token} (id {id}; {T} tokens in all) through {L} blocks of n_embd {C} to "
                   "the next token, over a vocabulary of {V}",
                   "토큰 {i} {token}(id {id}, 전체 토큰 {T}개)의 길: n_embd {C}인 block {L}개를 지나 다음 토큰까지, "
                   "어휘 {V}개"),
    "path.embed": ("1. Embedding. The id picks row {id} of tok_emb, {C} learned numbers for this token; the position "
                   "picks row {i} of pos_emb. Their sum is the residual stream that enters the first block. Both are "
                   "needed: the id says which token, not where, and attention, a weighted sum over keys, ignores "
                   "order by itself.",
                   "1. embedding. id로 tok_emb의 {id}번째 행을 꺼냅니다: 이 토큰에 대해 학습된 숫자 {C}개입니다. "
                   "위치로는 pos_emb의 {i}번째 행을 꺼냅니다. 둘을 더한 것이 첫 block으로 들어가는 residual stream "
                   "입니다. 둘 다 필요한 이유: id는 어떤 토큰인지만 말하고 어디에 있는지는 말하지 않으며, attention은 "
                   "key들의 가중합이라 그 자체로는 순서를 모릅니다."),
    "path.blocks": ("2. The blocks. Each reads the residual stream and adds to it, never replacing it. ln_1 rescales "
                    "the stream (mean 0, variance 1, then a learned gain and bias) so every block reads inputs of "
                    "one size; the {H} heads (d_k = {d} each) look at the earlier tokens (per head: the key it "
                    "attends to most, its attention, and the size of its share of out, y_h W_O); out is added; then "
                    "ln_2 and the MLP, which works on each token alone ({C} → 4·{C} → {C}, GELU), add theirs. "
                    "|·| is the stream's norm at each point; --explain L.H --query {i} walks through one head at this token.",
                    "2. block. 각 block은 residual stream을 읽고 거기에 더하기만 하며, 있던 값을 바꾸지 않습니다. "
                    "ln_1은 stream을 평균 0, 분산 1로 맞춘 뒤 학습된 gain과 bias를 적용해, 모든 block이 같은 크기의 "
                    "입력을 읽게 합니다. 이어서 head {H}개(각 d_k = {d})가 앞의 토큰들을 봅니다(head마다 가장 많이 "
                    "보는 key, 그 attention 값, out에서 그 head가 차지하는 몫 y_h W_O의 크기). out을 더한 다음 ln_2와 "
                    "MLP가 자기 몫을 더합니다. MLP는 토큰마다 따로 계산합니다({C} → 4·{C} → {C}, GELU). |·|는 각 "
                    "지점에서 stream의 norm입니다. 이 토큰에서 한 head의 계산은 --explain L.H --query {i}로 단계별로 볼 수 "
                    "있습니다."),
    "path.block": ("   block {layer}: |resid| {resid} → + attention out ({out}) → {mid} → + MLP → {block}",
                   "   block {layer}: |resid| {resid} → attention out({out}) 더함 → {mid} → MLP 더함 → {block}"),
    "path.key": ("strongest key", "가장 많이 보는 key"),
    "path.mlp": ("   MLP: |mlp| = {mlp}; {active}% of its {hidden} hidden units are positive after GELU",
                 "   MLP: |mlp| = {mlp}. hidden unit {hidden}개 중 {active}%가 GELU 뒤에 양수입니다"),
    "path.final": ("3. ln_f normalises the last block's output, and the head multiplies it by tok_emb's {V} x {C} matrix "
                   "(tied: the rows that read tokens in also write them out): one logit per vocabulary token, the dot "
                   "product of the stream with that token's row.",
                   "3. ln_f가 마지막 block의 출력을 정규화하고, head가 여기에 tok_emb의 {V} x {C} 행렬을 곱합니다(tied: "
                   "토큰을 읽어 들인 그 행들로 토큰을 내보냅니다). 어휘의 토큰마다 logit이 하나씩 나옵니다: stream과 그 "
                   "토큰 행의 내적입니다."),
    "path.logits": ("   the logits run from {min} to {max}", "   logit 범위: {min} ~ {max}"),
    "path.softmax": ("4. softmax turns the {V} logits into probabilities, p_j = exp(logit_j) / Σ exp(logit): a logit "
                     "larger by 1 makes a token e ≈ 2.718 times as likely. The 10 most likely:",
                     "4. softmax가 logit {V}개를 확률로 바꿉니다, p_j = exp(logit_j) / Σ exp(logit). logit이 1 크면 그 "
                     "토큰의 확률은 e ≈ 2.718배가 됩니다. 가장 가능성이 높은 10개:"),
    "path.repetition_penalty": ("   repetition penalty {value}: each token already in the text (the end-of-text token "
                                "aside) has its logit divided by {value} where positive, multiplied where negative, so "
                                "a repeat becomes less likely. {kept} tokens keep a probability above 0:",
                                "   repetition penalty {value}: 텍스트에 이미 나온 토큰(end-of-text 토큰은 빼고)의 "
                                "logit을 양수면 {value}로 나누고 음수면 곱해서, 같은 토큰이 다시 나올 가능성을 "
                                "낮춥니다. 확률이 0보다 큰 토큰: {kept}개"),
    "path.temperature": ("   temperature {value}: the logits are divided by it before softmax; below 1 sharpens the "
                         "distribution, above 1 flattens it, 0 always takes the most likely token. {kept} tokens keep "
                         "a probability above 0:",
                         "   temperature {value}: softmax 전에 logit을 이 값으로 나눕니다. 1보다 작으면 분포가 "
                         "뾰족해지고, 1보다 크면 평평해지며, 0이면 언제나 가장 가능성이 높은 토큰을 고릅니다. 확률이 "
                         "0보다 큰 토큰: {kept}개"),
    "path.top_k": ("   top-k {value}: only the {value} most likely tokens stay; the others get probability 0 and the "
                   "rest is divided again to sum to 1. {kept} tokens left:",
                   "   top-k {value}: 가장 가능성이 높은 토큰 {value}개만 남기고 나머지는 확률 0으로 만든 뒤, 남은 "
                   "확률의 합이 1이 되도록 다시 나눕니다. 남은 토큰: {kept}개"),
    "path.top_p": ("   top-p {value}: the smallest set of most likely tokens whose probabilities sum to {value} or more "
                   "stays (nucleus sampling), divided again. {kept} tokens left:",
                   "   top-p {value}: 확률이 높은 토큰부터 더해 합이 {value} 이상이 되는 가장 작은 집합만 남기고"
                   "(nucleus sampling) 다시 나눕니다. 남은 토큰: {kept}개"),
    "path.rank": ("rank", "순위"),
    "path.chosen": ("The next token, drawn from the last distribution (seed {seed}): {token} (id {id}, p {p}), the "
                    "token generate.py --seed {seed} --max-new-tokens 1 writes after this one",
                    "마지막 분포에서 뽑은 다음 토큰 (seed {seed}): {token} (id {id}, p {p}). generate.py --seed {seed} "
                    "--max-new-tokens 1이 이 토큰 뒤에 쓰는 토큰입니다"),
    "path.hint": ("A map shows where a head looked, not why the output changed: heads have no fixed meaning, and "
                  "attention is a hint, not a causal explanation. To test what a head does, switch it off "
                  "(--ablate L.H) and compare.",
                  "attention map은 head가 어디를 봤는지 보여 줄 뿐, 출력이 왜 그렇게 나왔는지는 알려 주지 않습니다. "
                  "head의 의미는 정해져 있지 않고, attention은 원인에 대한 설명이 아니라 단서입니다. head가 실제로 "
                  "무슨 일을 하는지 확인하려면 그 head를 끄고(--ablate L.H) 비교해 보세요."),
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
    "plot.weight": ("attention weight", "attention 가중치"),
    "plot.layer": ("layer {layer}: attention per head (rows attend to columns)",
                   "layer {layer}: head별 attention (행 = query, 열 = key)"),
    # ---- the offline page (inspection/page.html): plain {name} fields, filled in by the page ----------
    "page.language": ("Language", "언어"),
    "page.layer": ("Layer", "Layer"),
    "page.head": ("Head", "Head"),
    "page.layer_n": ("layer {n}", "layer {n}"),
    "page.head_n": ("head {n}", "head {n}"),
    "page.all_heads": ("all heads", "모든 head"),
    "page.decoding_step": ("Decoding step", "디코딩 단계"),
    "page.training_step": ("Training step", "학습 step"),
    "page.hint": ("Hover a token of the line below to see its attention; click any token or heatmap row to pin it "
                  "(click again to unpin) and to open the step-by-step walkthrough of that head at that query token.",
                  "아래 줄의 토큰에 마우스를 올리면 그 토큰의 attention이 보입니다. 토큰이나 heatmap의 행을 클릭하면 "
                  "고정되고(다시 클릭하면 풀림), 그 query 토큰에서 그 head의 계산을 단계별로 보여 줍니다."),
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
    "page.roles_title": ("role scores{at} (held-out text, inspection/heads.py):",
                         "역할 점수{at} (학습에 쓰지 않은 텍스트, inspection/heads.py):"),
    "page.roles_at": (" at step {step}", ": step {step} 시점"),
    "page.roles_columns": ("head|previous|first|self|duplicate|induction", "head|이전 토큰|첫 토큰|자기 자신|중복 토큰|induction"),
    "page.chance": ("chance", "우연"),
    "page.drop": ("in-context loss drop on repeated random tokens: {drop} nats ({first} on the first copy, {second} on "
                  "the second)",
                  "반복된 무작위 토큰에서 in-context loss 감소: {drop} nats (첫 번째 복사본 {first}, 두 번째 {second})"),
    "page.frame": ("step {step} ({n} of {total} snapshots)", "step {step} (snapshot {total}개 중 {n}번째)"),
    "page.prefill": ("prefill: tokens 0..{last} in one forward; the cache holds {keys} keys{next}",
                     "prefill: 토큰 0..{last}, 한 번의 forward; cache에 key {keys}개{next}"),
    "page.decode": ("step {step} of {steps}: token {last} “{token}” went in, its row attends over the {keys} cached "
                    "keys{next}",
                    "{steps}단계 중 {step}단계: 토큰 {last} “{token}” 입력, 그 query 행이 cache된 key {keys}개를 "
                    "봅니다{next}"),
    "page.chose": (" and chose token {n} “{token}”", "; 다음 토큰: 토큰 {n} “{token}”"),
    "page.path_title": ("The path of the focused token: from its id to the next token",
                        "초점 토큰의 길: id에서 다음 토큰까지"),
    "page.sampling_title": ("The next token after the text: move temperature, top-k and top-p",
                            "텍스트 다음에 올 토큰: temperature, top-k, top-p를 바꿔 보세요"),
    "page.bars": ("After the last token {token}: {kept} of {V} tokens keep a probability above 0; the 10 most likely:",
                  "마지막 토큰 {token} 다음: 토큰 {V}개 중 {kept}개가 0보다 큰 확률을 가집니다. 가장 가능성이 높은 10개:"),
    "page.bad_settings": ("temperature must be 0 or more, top-k 1 or more, top-p above 0 and at most 1",
                          "temperature는 0 이상, top-k는 1 이상, top-p는 0보다 크고 1 이하여야 합니다"),
    "page.lines": ("{name}: where token {i} “{token}” looks; a line's thickness is its attention",
                   "{name}: 토큰 {i} “{token}”의 attention이 향하는 곳. 선이 굵을수록 attention 값이 큽니다"),
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
    "page.next": ("the next token (top 10 with these settings): probability, token (id)",
                  "다음 토큰 (이 설정으로 상위 10개): 확률, 토큰 (id)"),
    "page.next_off": ("the next token with heads {heads} off (top 10 with these settings): probability (the full "
                      "model's), token (id)",
                      "head {heads}를 끈 다음 토큰 (이 설정으로 상위 10개): 확률 (전체 모델의 확률), 토큰 (id)"),
    "page.held_out": ("held-out loss with those heads off: {loss} nats per token (full model {full}, {diff})",
                      "그 head를 끈 검증 텍스트 loss: 토큰당 {loss} nats (전체 모델 {full}, {diff})"),
    "page.off_switch": ("off", "끄기"),
    "page.timing": ("model {model} ms, drawing {draw} ms, {total} ms from the keystroke",
                    "모델 {model} ms, 그리기 {draw} ms, 키 입력부터 표시까지 {total} ms"),
}


def locale_language() -> str:
    """"ko" when the locale is Korean (the first of LC_ALL, LC_MESSAGES, LANG that is set is "ko" or "ko_...",
    with or without ".encoding" or "@modifier"; not "kok_IN", Konkani), else "en"."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "ko" if re.match(r"ko(?:[_.@]|$)", value, re.IGNORECASE) else "en"
    return "en"


def messages(lang: str | None = None):
    """say(key, **fields) -> the text of `key` in `lang` ("en" or "ko"; None: the locale's), fields filled in."""
    index = LANGUAGES.index(lang or locale_language())

    def say(key: str, **fields) -> str:
        return MESSAGES[key][index].format(**fields)

    return say


def fields_of(text: str) -> list[str]:
    """The {fields} a text takes, in order (what tests/test_messages.py compares between the languages)."""
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


def page_messages() -> dict[str, list[str]]:
    """The texts the page needs, both languages: {key: [en, ko]}."""
    return {key: list(texts) for key, texts in MESSAGES.items()
            if key.startswith(("page.", "role.", "roles.off", "lens.", "ablate.", "path.", "explain."))}
