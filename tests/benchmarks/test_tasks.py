"""Task generators: labels by brute force, layouts, determinism by seed, baselines."""

from __future__ import annotations

import itertools

import pytest
import torch

from adapters.exceptions import AdapterConfigError
from benchmarks.hrm.tasks import (
    BIT_IDS,
    IGNORE_INDEX,
    MAX_STATES,
    SEP_Q_ID,
    SEP_T_ID,
    STATE_IDS,
    TASK_CHARACTERS,
    UNK_ID,
    VOCAB_SIZE,
    char_corpus,
    character_table,
    decode,
    dfa_batches,
    dfa_last_symbol_accuracy,
    dfa_task,
    encode,
    format_batches,
    lm_batches,
    lm_eval_batches,
    parity_batches,
    parity_task,
    task_baselines,
)


def _run_dfa_by_hand(row: list[int], k: int, length: int) -> int:
    """Parse one DFA sample and execute its table one symbol at a time."""
    table = [tok - STATE_IDS[0] for tok in row[: 2 * k]]
    assert row[2 * k] == SEP_T_ID
    symbols = [tok - BIT_IDS[0] for tok in row[2 * k + 1 : 2 * k + 1 + length]]
    assert row[2 * k + 1 + length] == SEP_Q_ID
    state = 0
    for bit in symbols:
        state = table[2 * state + bit]
    return state


@pytest.mark.parametrize(("k", "length"), [(2, 1), (2, 16), (4, 32), (7, 9), (MAX_STATES, 40)])
def test_dfa_labels_match_brute_force(k, length):
    batch = dfa_task(64, k=k, length=length, seed=3)
    assert batch.input_ids.shape == batch.labels.shape == (64, 2 * k + length + 3)
    for row, lab in zip(batch.input_ids.tolist(), batch.labels.tolist(), strict=True):
        final = _run_dfa_by_hand(row, k, length)
        assert row[-1] == STATE_IDS[final]
        assert lab[:-1] == [IGNORE_INDEX] * (len(lab) - 1)
        assert lab[-1] == STATE_IDS[final]
        # the sample uses only the k + 4 ids of the paper's DFA vocabulary
        allowed = set(STATE_IDS[:k]) | set(BIT_IDS) | {SEP_T_ID, SEP_Q_ID}
        assert set(row) <= allowed


def test_dfa_stream_labels_and_independence_from_fixed_set():
    stream = dfa_batches(32, k=3, length=12, seed=5)
    first, second = next(stream), next(stream)
    for batch in (first, second):
        for row in batch.input_ids.tolist():
            assert row[-1] == STATE_IDS[_run_dfa_by_hand(row, 3, 12)]
    assert not torch.equal(first.input_ids, second.input_ids)
    fixed = dfa_task(32, k=3, length=12, seed=5)
    assert not torch.equal(first.input_ids, fixed.input_ids)


def test_generators_are_deterministic_by_seed():
    assert torch.equal(dfa_task(50, k=4, length=20, seed=1).input_ids,
                       dfa_task(50, k=4, length=20, seed=1).input_ids)
    assert not torch.equal(dfa_task(50, k=4, length=20, seed=1).input_ids,
                           dfa_task(50, k=4, length=20, seed=2).input_ids)
    a = [b.input_ids for b in itertools.islice(parity_batches(8, length=10, seed=4), 3)]
    b = [b.input_ids for b in itertools.islice(parity_batches(8, length=10, seed=4), 3)]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    tokens = torch.arange(1000) % VOCAB_SIZE
    a = next(lm_batches(tokens, batch_size=4, seq_len=16, seed=9)).input_ids
    b = next(lm_batches(tokens, batch_size=4, seq_len=16, seed=9)).input_ids
    assert torch.equal(a, b)


@pytest.mark.parametrize("length", [1, 5, 16, 33])
def test_parity_final_labels_match_brute_force(length):
    batch = parity_task(100, length=length, seed=0)
    assert batch.input_ids.shape == (100, length + 2)
    for row, lab in zip(batch.input_ids.tolist(), batch.labels.tolist(), strict=True):
        bits = [tok - BIT_IDS[0] for tok in row[:length]]
        assert set(bits) <= {0, 1}
        assert row[length] == SEP_Q_ID
        parity = 0
        for bit in bits:
            parity ^= bit
        assert lab == [IGNORE_INDEX] * (length + 1) + [BIT_IDS[parity]]
        assert row[-1] == BIT_IDS[parity]


def test_parity_running_labels_match_brute_force():
    length = 12
    batch = parity_task(40, length=length, seed=1, mode="running")
    assert batch.input_ids.shape == (40, 2 * length + 1)
    for row, lab in zip(batch.input_ids.tolist(), batch.labels.tolist(), strict=True):
        parity, expected = 0, []
        for tok in row[:length]:
            parity ^= tok - BIT_IDS[0]
            expected.append(BIT_IDS[parity])
        assert row[length] == SEP_Q_ID
        assert row[length + 1 :] == expected
        assert lab == [IGNORE_INDEX] * (length + 1) + expected


def test_baselines_on_a_known_set():
    dfa = dfa_task(4000, k=4, length=16, seed=0)
    base = task_baselines(dfa, 4)
    answers = dfa.input_ids[:, -1]
    counts = torch.bincount(answers - STATE_IDS[0], minlength=4)
    assert base.chance == 0.25
    assert base.n_answers == 4000
    assert base.majority == pytest.approx(int(counts.max()) / 4000)
    assert base.majority_label == STATE_IDS[int(counts.argmax())]
    # a random table makes the final state close to uniform
    assert 0.25 <= base.majority < 0.32
    par = task_baselines(parity_task(4000, length=16, seed=0), 2)
    assert par.chance == 0.5 and 0.5 <= par.majority < 0.53


def test_format_batches_never_supervise_answers():
    batch = next(format_batches(6, seq_len=200, seed=0, max_states=5, max_length=20))
    assert batch.input_ids.shape == batch.labels.shape == (6, 200)
    ids, labels = batch.input_ids, batch.labels
    supervised = labels != IGNORE_INDEX
    assert torch.equal(labels[supervised], ids[supervised])
    # the token after every SEP_Q is an answer, and it is never a target
    after_query = torch.zeros_like(supervised)
    after_query[:, 1:] = ids[:, :-1] == SEP_Q_ID
    assert after_query.any()
    assert not supervised[after_query].any()
    assert not supervised[~after_query].logical_not().any()
    assert ids.max() < STATE_IDS[5] and ids.min() >= SEP_T_ID


def test_character_form_of_dfa_and_parity_samples():
    table = character_table()
    assert table.shape == (VOCAB_SIZE,) and table.dtype == torch.int64
    task_ids = set(TASK_CHARACTERS)
    assert task_ids == set(STATE_IDS) | set(BIT_IDS) | {SEP_T_ID, SEP_Q_ID}
    # every other id maps to itself; every task id to the character it names
    for i in range(VOCAB_SIZE):
        expected = encode(TASK_CHARACTERS[i]) if i in task_ids else torch.tensor([i])
        assert torch.equal(table[i : i + 1], expected), i
    # injective on the ids of one task (all 16 states, bits, separators)
    assert len({int(table[i]) for i in task_ids}) == len(task_ids)
    k, length = 3, 12
    batch = dfa_task(20, k=k, length=length, seed=5)
    for row, answer in zip(batch.input_ids.tolist(), batch.labels[:, -1].tolist(), strict=True):
        text = decode(table[torch.tensor(row)])
        states = "ABC"
        # the same sample written by hand: table letters | bits = answer letter
        table_part = "".join(states[t - STATE_IDS[0]] for t in row[: 2 * k])
        bits = "".join(str(t - BIT_IDS[0]) for t in row[2 * k + 1 : 2 * k + 1 + length])
        assert text == f"{table_part}|{bits}={states[answer - STATE_IDS[0]]}"
        assert _run_dfa_by_hand(row, k, length) == answer - STATE_IDS[0]
    parity = parity_task(5, length=7, seed=1)
    for row in parity.input_ids.tolist():
        text = decode(table[torch.tensor(row)])
        assert set(text) <= set("01=") and text[7] == "="
        assert int(text[-1]) == text[:7].count("1") % 2


@pytest.mark.parametrize(("k", "length"), [(2, 1), (2, 16), (3, 9), (5, 30)])
def test_last_symbol_rule_matches_brute_force(k, length):
    test = dfa_task(400, k=k, length=length, seed=3)
    answers = [row[-1] - STATE_IDS[0] for row in test.input_ids.tolist()]
    majority = max(range(k), key=lambda j: (answers.count(j), -j))
    correct = 0
    for row, answer in zip(test.input_ids.tolist(), answers, strict=True):
        table = [t - STATE_IDS[0] for t in row[: 2 * k]]
        last = row[2 * k + length] - BIT_IDS[0]
        votes = [sum(table[2 * q + last] == j for q in range(k)) for j in range(k)]
        best = [j for j in range(k) if votes[j] == max(votes)]
        guess = majority if majority in best else best[0]
        correct += guess == answer
    assert dfa_last_symbol_accuracy(test, k) == pytest.approx(correct / len(answers), abs=0)
    with pytest.raises(AdapterConfigError, match="not a DFA set with k=3"):
        dfa_last_symbol_accuracy(dfa_task(4, k=2, length=5, seed=0), 3)


def test_encode_decode_round_trip_and_vocabulary():
    text = "def f(x):\n    return x ~ 1 \u201cq\u201d \u00df"
    ids = encode(text)
    assert ids.dtype == torch.int64 and int(ids.max()) < VOCAB_SIZE
    assert decode(ids) == 'def f(x):\n    return x ~ 1 "q" <UNK>'
    assert int(ids[-1]) == UNK_ID
    task_ids = set(STATE_IDS) | set(BIT_IDS) | {SEP_T_ID, SEP_Q_ID, UNK_ID}
    assert not set(encode("".join(chr(c) for c in range(32, 127)) + "\n").tolist()) & task_ids


def test_char_corpus_split_and_windows():
    corpus = char_corpus(0.1)
    total = corpus.train.numel() + corpus.val.numel()
    assert total > 400_000
    assert abs(corpus.val.numel() / total - 0.1) < 1e-3
    assert float((corpus.train == UNK_ID).float().mean()) < 1e-3
    windows = lm_eval_batches(corpus.val, batch_size=8, seq_len=64, max_batches=3)
    assert len(windows) == 3
    flat = torch.cat([b.input_ids for b in windows]).reshape(-1)
    assert torch.equal(flat, corpus.val[: flat.numel()])
    batch = next(lm_batches(corpus.train, batch_size=4, seq_len=32, seed=0))
    assert torch.equal(batch.input_ids, batch.labels) and batch.input_ids.shape == (4, 32)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: dfa_task(4, k=1, length=3, seed=0), "`k`"),
        (lambda: dfa_task(4, k=MAX_STATES + 1, length=3, seed=0), "`k`"),
        (lambda: dfa_task(4, k=2, length=0, seed=0), "`length`"),
        (lambda: dfa_task(4, k=2, length=3, seed=-1), "`seed`"),
        (lambda: parity_task(4, length=3, seed=0, mode="prefix"), "`mode`"),
        (lambda: char_corpus(1.5), "`val_fraction`"),
    ],
)
def test_invalid_arguments_name_the_argument(call, name):
    with pytest.raises(AdapterConfigError, match=name):
        call()
