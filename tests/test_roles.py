"""Head roles (inspection/views/roles.py) against known answers: hand-set heads, a hand-built copying model, init.

    python -m pytest tests/test_roles.py -q
"""

import json

import numpy as np
import pytest
import torch

from inspection.views.roles import (ROLES, HeadRoles, copying_circuit, format_roles_table, measure_heads,
                                    repeated_sequences, roles_from_record, roles_record, text_role_sums)
from model import GPT, GPTConfig
from tests.conftest import P, V, copying_model
from training.evaluation import heads_line

def random_text(n=64, seed=1):
    return torch.randint(1, V, (n,), generator=torch.Generator().manual_seed(seed)).numpy()


@pytest.fixture(scope="module")
def copying_roles():
    return measure_heads(copying_model(), random_text(), list(range(1, V)), eot_id=0)


def test_a_hand_set_previous_token_head_scores_1_on_that_role_and_0_on_the_others(copying_roles):
    s = copying_roles.scores
    assert s["previous-token"][0, 0] > 0.99
    for role in ("first-token", "self", "duplicate-token", "induction"):
        assert s[role][0, 0] < 0.01, role
    assert copying_roles.strongest(0, 0)[0] == "previous-token"


def test_a_hand_built_copying_model_has_an_induction_head_and_learns_in_context(copying_roles):
    assert copying_roles.scores["induction"][1, 0] > 0.95
    assert copying_roles.strongest(1, 0)[0] == "induction"
    assert copying_roles.loss_second < 0.05 and copying_roles.loss_drop > 1.0
    # it copies: the second copy of each sequence is predicted exactly
    seqs = repeated_sequences(range(1, V), 7, 4, seed=3, eot_id=0)  # (4, 15)
    logits, _ = copying_model()(seqs, all_logits=True)
    assert torch.equal(logits[:, 8:14].argmax(-1), seqs[:, 9:15])
    for layer in (0, 1):  # the zeroed heads spread evenly: chance everywhere, no role
        for role in ROLES:
            assert copying_roles.scores[role][layer, 1] == pytest.approx(copying_roles.chance[role], abs=1e-6)
        assert copying_roles.strongest(layer, 1)[0] == "mixed"


def test_a_model_at_initialisation_scores_near_chance():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, block_size=P, n_layer=2, n_head=2, n_embd=32)).eval()
    roles = measure_heads(model, random_text(), list(range(1, V)), eot_id=0)
    for role in ROLES:
        np.testing.assert_allclose(roles.scores[role], roles.chance[role], rtol=0.1)
    assert abs(roles.loss_drop) < 0.05
    assert {roles.strongest(l, h)[0] for l in range(2) for h in range(2)} == {"mixed"}


def test_text_scores_follow_their_definitions_by_loops():
    rng = np.random.default_rng(0)
    B, T = 2, 7
    ids = torch.tensor([[0, 3, 4, 3, 3, 5, 4], [0, 1, 2, 1, 0, 2, 2]])
    w = rng.random((B, 1, 1, T, T)) * np.tril(np.ones((T, T)))
    w /= w.sum(-1, keepdims=True)
    sums = text_role_sums(torch.from_numpy(w), ids)
    queries = [(b, q) for b in range(B) for q in range(2, T)]
    expected = {
        "previous-token": [w[b, 0, 0, q, q - 1] for b, q in queries],
        "first-token": [w[b, 0, 0, q, 0] for b, q in queries],
        "self": [w[b, 0, 0, q, q] for b, q in queries],
    }
    dups = [(b, q, [k for k in range(1, q - 1) if ids[b, k] == ids[b, q]]) for b, q in queries]
    expected["duplicate-token"] = [sum(w[b, 0, 0, q, k] for k in ks) for b, q, ks in dups if ks]
    for role, values in expected.items():
        total, n = sums[role]
        assert n == len(values) and float(total[0, 0]) == pytest.approx(sum(values), abs=1e-12), role
    # by hand: row 0 queries 3, 4, 6 and row 1 queries 3, 5, 6 (row 1's query 4 only repeats key 0, the first token)
    assert sums["duplicate-token"][1] == 6


def test_repeated_sequences_are_two_copies_of_distinct_tokens():
    seqs = repeated_sequences(range(1, V), 5, 3, seed=0, eot_id=0)
    assert seqs.shape == (3, 11) and torch.all(seqs[:, 0] == 0)
    assert torch.equal(seqs[:, 1:6], seqs[:, 6:])
    assert all(len(set(row[1:6].tolist())) == 5 for row in seqs) and int(seqs[:, 1:].min()) >= 1


def test_table_ranks_heads_by_their_strongest_role_and_the_record_holds_every_score(copying_roles):
    lines = format_roles_table(copying_roles).splitlines()
    ranked = [tuple(int(x) for x in line.split()[1:3]) for line in lines[1:5]]
    assert set(ranked[:2]) == {(0, 0), (1, 0)} and set(ranked[2:]) == {(0, 1), (1, 1)}
    assert "loss" in lines[-1] and f"drop {copying_roles.loss_drop:.3f}" in lines[-1]
    saved = json.loads(json.dumps(roles_record(copying_roles)))  # heads.json's and metrics.jsonl's one form
    assert saved["loss_drop"] == pytest.approx(copying_roles.loss_drop, abs=1e-6)
    assert saved["scores"]["previous-token"][0][0] == pytest.approx(copying_roles.scores["previous-token"][0, 0], abs=1e-6)
    assert set(saved["chance"]) == set(ROLES)
    back = roles_from_record(saved)
    assert back.strongest(0, 0)[0] == "previous-token" and back.strongest(1, 0) == copying_roles.strongest(1, 0)
    unranked = lambda table: sorted(line[5:] for line in table.splitlines())  # noqa: E731  (1.000 and 0.9999999 tie)
    assert unranked(format_roles_table(back)) == unranked(format_roles_table(copying_roles))
    assert copying_roles.labels()[1][0].startswith("induction ")


def test_the_copying_circuit_of_the_hand_built_model_is_its_two_heads(copying_roles):
    circuit = copying_circuit(copying_roles)
    assert circuit.previous[:2] == (0, 0) and circuit.induction[:2] == (1, 0)
    assert circuit.previous[2] > 0.99 and circuit.induction[2] > 0.99 and circuit.drop > 13 and circuit.formed


def hand_set_roles(previous, induction, drop) -> HeadRoles:
    """Roles with these previous-token and induction scores (L, H) and loss drop; the other roles 0."""
    scores = {r: np.zeros_like(np.asarray(previous, dtype=float)) for r in ROLES}
    scores["previous-token"], scores["induction"] = np.asarray(previous, float), np.asarray(induction, float)
    return HeadRoles(scores, {r: 0.05 for r in ROLES}, loss_first=drop + 0.1, loss_second=0.1)


def test_the_circuit_pairs_an_induction_head_with_a_previous_token_head_in_a_layer_below_it():
    # the strongest previous-token head (2.1) sits above every induction head, and the strongest induction
    # head (0.0) has no layer below it: the circuit is 0.1 feeding 1.0, the pair whose weaker score is highest
    roles = hand_set_roles(previous=[[0.1, 0.6], [0.2, 0.3], [0.1, 0.95]],
                           induction=[[0.9, 0.0], [0.7, 0.1], [0.2, 0.55]], drop=3.0)
    circuit = copying_circuit(roles)
    assert (circuit.previous, circuit.induction, circuit.drop) == ((0, 1, 0.6), (1, 0, 0.7), pytest.approx(3.0))
    assert circuit.formed
    for previous, induction, drop in [(0.49, 0.7, 3.0), (0.6, 0.49, 3.0), (0.6, 0.7, 1.99)]:  # one bar missed
        roles = hand_set_roles([[0.1, previous], [0.0, 0.0]], [[0.0, 0.0], [induction, 0.0]], drop)
        assert not copying_circuit(roles).formed
    one_layer = copying_circuit(hand_set_roles([[0.9, 0.1]], [[0.1, 0.8]], 5.0))
    assert one_layer.previous is None and one_layer.induction == (0, 1, 0.8) and not one_layer.formed


def test_the_runs_heads_line_names_the_circuit_or_what_to_try(tmp_path):
    formed = roles_record(hand_set_roles([[0.1, 0.6], [0.0, 0.0]], [[0.0, 0.0], [0.7, 0.2]], 3.0))
    none = roles_record(hand_set_roles([[0.1, 0.3], [0.0, 0.0]], [[0.0, 0.0], [0.05, 0.2]], 1.0))
    run = tmp_path / "heads"
    line = heads_line({"best_heads": formed, "best_step": 3400, "step": 6000}, run, none, lesson=True)
    assert line == (f"heads of best/ (step 3,400): previous-token 0.60 at layer 0 head 1, induction 0.70 at layer 1 "
                    f"head 0, in-context loss drop 3.00 nats; see them with: python generate.py --ckpt {run} --heads")
    line = heads_line({"best_heads": none, "best_step": 1400, "step": 6000}, run, formed, lesson=False)
    assert line == (f"heads of best/ (step 1,400): no copying circuit, but last/ (step 6,000) has one; see it with: "
                    f"python generate.py --ckpt {run / 'last'} --heads")
    line = heads_line({"best_heads": none, "best_step": 6000, "step": 6000}, run, none, lesson=True)
    assert line == ("heads of best/ (step 6,000): no copying circuit formed: previous-token 0.30 at layer 0 head 1, "
                    "induction 0.20 at layer 1 head 1, in-context loss drop 1.00 nats, where a circuit needs a "
                    "previous-token score of 0.5, an induction score of 0.5 and an in-context loss drop of 2 nats; try "
                    "another --train.seed, or more --train.max_steps")
    assert heads_line({"best_heads": none, "best_step": 9, "step": 9}, run, none, lesson=False).endswith("drop of 2 nats")
    assert heads_line({"best_heads": None, "best_step": 9, "step": 9}, run, None, lesson=True) is None
