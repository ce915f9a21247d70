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
    "stats.columns": ("layer|head|entropy|distance|prev|first|self", "layer|head|엔트로피|거리|이전|첫토큰|자기"),
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
    "explain.step56": ("5. Masked: a key after the query gets -∞, so its weight is 0.  6. Softmax: w_j = exp(s_j) / "
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
                           "head|엔트로피|거리|이전|첫토큰|자기|가장 강한 역할"),
    "page.roles_title": ("role scores{at} (held-out text, inspection/heads.py):",
                         "역할 score{at} (학습에 쓰지 않은 텍스트, inspection/heads.py):"),
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
    "page.ex_title": ("Walkthrough: layer {layer}, head {head}, query token {i} “{token}”",
                      "단계별 계산: layer {layer}, head {head}, query 토큰 {i} “{token}”"),
    "page.ex1": ("1. Token {i} may attend to tokens 0..{i} (itself and every token before it){masked}. x_j = "
                 "ln_1(residual stream at j): the first {dims} of {C} values and the norm.",
                 "1. 토큰 {i}의 attention 대상: 토큰 0..{i}(자기 자신과 그 앞의 모든 토큰){masked}. x_j = "
                 "ln_1(j 위치의 residual stream): {C}개 값 중 처음 {dims}개와 norm."),
    "page.ex1_masked": ("; the later ones are masked (step 5)", "; 뒤의 토큰은 mask됩니다(5단계)"),
    "page.ex2": ("2. Into head {head}: q = x_{i} W_Q + b_Q, k_j = x_j W_K + b_K, v_j = x_j W_V + b_V (each W: {C} × "
                 "{d}, this head's columns).",
                 "2. head {head}의 q, k, v: q = x_{i} W_Q + b_Q, k_j = x_j W_K + b_K, v_j = x_j W_V + b_V (각 W: "
                 "{C} × {d}, 이 head의 열)."),
    "page.ex3": ("3. Scores q·k_j.  4. Divided by √d_k, d_k = {d} (n_embd / n_head = {C} / {H}): √{d} = {root}.  "
                 "5. Masked: a later key gets −∞.  6. Softmax: w_j = exp(s_j) / Σ exp(s).",
                 "3. score q·k_j.  4. √d_k로 나누기, d_k = {d} (n_embd / n_head = {C} / {H}): √{d} = {root}.  "
                 "5. mask: 뒤의 key는 −∞.  6. softmax: w_j = exp(s_j) / Σ exp(s)."),
    "page.ex_token": ("token", "토큰"),
    "page.ex_masked": ("5. masked", "5. mask 후"),
    "page.ex_more": ("… and {n} more later keys, all masked: −∞, w_j = 0", "… 그리고 뒤의 key {n}개, 모두 mask: −∞, w_j = 0"),
    "page.ex_largest": ("The largest terms w_j v_j (by norm, w_j |v_j|):", "가장 큰 항 w_j v_j (norm w_j |v_j| 기준):"),
    "page.ex8": ("8. Where y goes: its {d} values become dims {lo}..{last} of the {C}-vector that concatenates the "
                 "outputs of all {H} heads at token {i}; that vector times W_O ({C} × {C}) plus b_O is what the "
                 "attention sublayer adds to the residual stream:",
                 "8. y가 가는 곳: y의 값 {d}개는 토큰 {i}에서 head {H}개 모두의 출력을 이어 붙인 {C}차원 벡터의 "
                 "{lo}..{last}번째 차원이 되고, 그 벡터에 W_O ({C} × {C})를 곱하고 b_O를 더한 것이 attention "
                 "sublayer가 residual stream에 더하는 값입니다:"),
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
            if key.startswith(("page.", "role.", "roles.off", "lens.", "ablate."))}
