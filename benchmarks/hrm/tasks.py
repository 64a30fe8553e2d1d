"""Synthetic tasks and the character corpus, in one shared token vocabulary.

Every task is generated on the fly from a seed (no downloads) and tokenised into the same
vocabulary, so one frozen backbone can be pretrained on text and fine-tuned on the
synthetic tasks. Shapes: ``(B, Lseq)`` for token and label tensors.

Shared vocabulary (``VOCAB_SIZE = 118`` ids)
---------------------------------------------
======  ==========================================================================
id      token
======  ==========================================================================
0       ``PAD`` (never produced by the generators; given to HF as ``pad_token_id``)
1       ``UNK`` (a character outside the fixed alphabet)
2       ``SEP_T`` (end of a DFA transition table)
3       ``SEP_Q`` (query: "the answer comes next")
4, 5    ``BIT0``, ``BIT1`` (the binary input alphabet of DFA and parity)
6..21   ``S0`` .. ``S15`` (DFA states; ``MAX_STATES = 16``)
22      ``"\\n"``
23..117 printable ASCII ``" "`` (32) .. ``"~"`` (126), in code-point order
======  ==========================================================================

A k-state DFA sample therefore uses exactly ``k + 4`` distinct ids (k states, two bits,
``SEP_T``, ``SEP_Q``), the vocabulary of the paper's DFA task, embedded at reserved ids of
the shared vocabulary; the character ids never occur in task samples.

Character form. :func:`character_table` maps every task token to one printable character
(:data:`TASK_CHARACTERS`: ``SEP_T`` -> ``|``, ``SEP_Q`` -> ``=``, bits -> ``0``/``1``, states
-> ``A``, ``B``, ...) and every other id to itself, so a task sample can be fed to a model
as text, as a real pretrained language model reads such a prompt. The main job does this
for the project's own backbone too: its pretraining never makes the identity of a state
token predictable (tables are uniform, answers unsupervised), so the reserved state ids
keep nearly equal embeddings (cosine similarity 0.93 between ``S0`` and ``S1``), while text
pretraining gives the characters distinct ones.

Labels follow the Hugging Face causal-LM convention: ``labels`` has the shape of
``input_ids``, holds ``-100`` where no loss is taken, and ``labels[:, i]`` is predicted from
the logits at position ``i - 1`` (the model shifts internally). Task labels are ``-100``
everywhere except at the answer token(s).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from adapters.exceptions import AdapterConfigError

__all__ = [
    "BIT_IDS",
    "IGNORE_INDEX",
    "MAX_STATES",
    "PAD_ID",
    "SEP_Q_ID",
    "SEP_T_ID",
    "STATE_IDS",
    "UNK_ID",
    "TASK_CHARACTERS",
    "VOCAB_SIZE",
    "Baselines",
    "Batch",
    "CharCorpus",
    "char_corpus",
    "character_table",
    "copy_batches",
    "decode",
    "dfa_batches",
    "dfa_last_symbol_accuracy",
    "dfa_task",
    "encode",
    "format_batches",
    "induction_task",
    "lm_batches",
    "lm_eval_batches",
    "parity_batches",
    "parity_task",
    "task_baselines",
]

IGNORE_INDEX = -100
PAD_ID = 0
UNK_ID = 1
SEP_T_ID = 2
SEP_Q_ID = 3
BIT_IDS = (4, 5)
MAX_STATES = 16
STATE_IDS = tuple(range(6, 6 + MAX_STATES))
_NEWLINE_ID = 6 + MAX_STATES
_ASCII_BASE = _NEWLINE_ID + 1  # id of " " (code point 32)
VOCAB_SIZE = _ASCII_BASE + (126 - 32 + 1)

# Character form of the task tokens (see ``character_table``).
TASK_CHARACTERS = {SEP_T_ID: "|", SEP_Q_ID: "=", BIT_IDS[0]: "0", BIT_IDS[1]: "1"}
TASK_CHARACTERS.update({sid: chr(ord("A") + j) for j, sid in enumerate(STATE_IDS)})

# Typographic characters of the CPython docs folded to ASCII before tokenising.
_FOLD = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
                       "\u2013": "-", "\u2014": "-", "\u2026": "..."})

# Stream codes: (task, split) pairs give independent random streams for the same seed.
_DFA, _PARITY, _LM, _FORMAT, _COPY = 1, 2, 3, 4, 5
_FIXED, _STREAM = 0, 1


class Batch(NamedTuple):
    """A batch of token sequences with their causal-LM labels.

    Attributes
    ----------
    input_ids : torch.Tensor, shape (B, Lseq), int64
        Token ids in the shared vocabulary.
    labels : torch.Tensor, shape (B, Lseq), int64
        Target ids where a loss is taken, ``IGNORE_INDEX`` (-100) elsewhere;
        ``labels[:, i]`` is predicted from the output at position ``i - 1``.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor


@dataclass(frozen=True)
class Baselines:
    """Accuracy of answer-agnostic predictors on a labelled set.

    Attributes
    ----------
    chance : float
        ``1 / n_classes``: a uniformly random guess.
    majority : float
        Accuracy of always predicting the most frequent answer of this set.
    majority_label : int
        That most frequent answer (a token id).
    n_answers : int
        Number of answer positions the rates are computed over.
    """

    chance: float
    majority: float
    majority_label: int
    n_answers: int


def _rng(seed: int, task: int, split: int) -> np.random.Generator:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise AdapterConfigError(f"`seed` must be a non-negative integer; got {seed!r}")
    return np.random.default_rng([int(seed), task, split])


def _check_positive(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise AdapterConfigError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- tokeniser


def encode(text: str) -> torch.Tensor:
    """Tokenise text into the shared vocabulary, one id per character.

    Parameters
    ----------
    text : str
        Any string. Curly quotes, en/em dashes and the ellipsis are first folded to
        ASCII; every other character outside ``"\\n"`` and printable ASCII maps to
        ``UNK_ID``.

    Returns
    -------
    ids : torch.Tensor, shape (len(folded text),), int64
    """
    codes = np.frombuffer(text.translate(_FOLD).encode("utf-32-le"), dtype=np.uint32)
    ids = np.full(codes.shape, UNK_ID, dtype=np.int64)
    printable = (codes >= 32) & (codes <= 126)
    ids[printable] = codes[printable].astype(np.int64) - 32 + _ASCII_BASE
    ids[codes == 10] = _NEWLINE_ID
    return torch.from_numpy(ids)


def character_table() -> torch.Tensor:
    """The id map that writes task samples as plain characters of the shared vocabulary.

    Returns
    -------
    table : torch.Tensor, shape (VOCAB_SIZE,), int64
        ``table[i]`` is the character id of :data:`TASK_CHARACTERS` ``[i]`` for the task
        tokens (``SEP_T``, ``SEP_Q``, the bits, the states) and ``i`` for every other id.
        Apply it as ``table[input_ids]`` (and to labels other than ``-100``). It is
        injective within each task's tokens (a DFA sample's ``k + 4`` ids stay distinct),
        but not on the whole vocabulary: ``S0`` and the character ``A`` share one id.

    Examples
    --------
    >>> from benchmarks.hrm.tasks import character_table, decode, dfa_task
    >>> sample = dfa_task(1, k=2, length=6, seed=0).input_ids[0]
    >>> len(sample), len(decode(character_table()[sample]))
    (13, 13)
    >>> set(decode(character_table()[sample])) <= set("AB01|=")
    True
    """
    table = torch.arange(VOCAB_SIZE, dtype=torch.int64)
    for i, char in TASK_CHARACTERS.items():
        table[i] = _ASCII_BASE + ord(char) - 32
    return table


def decode(ids: torch.Tensor | np.ndarray | list[int]) -> str:
    """Map ids of the shared vocabulary back to a readable string.

    Parameters
    ----------
    ids : array-like of int, shape (L,)

    Returns
    -------
    text : str
        Characters for character ids; task and special tokens as ``<SEP_T>``,
        ``<SEP_Q>``, ``<0>``/``<1>`` (bits), ``<S3>`` (states), ``<PAD>``, ``<UNK>``.
    """
    out = []
    for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist():
        if i >= _ASCII_BASE and i < VOCAB_SIZE:
            out.append(chr(i - _ASCII_BASE + 32))
        elif i == _NEWLINE_ID:
            out.append("\n")
        elif i in STATE_IDS:
            out.append(f"<S{i - STATE_IDS[0]}>")
        elif i in BIT_IDS:
            out.append(f"<{i - BIT_IDS[0]}>")
        else:
            names = {PAD_ID: "<PAD>", UNK_ID: "<UNK>", SEP_T_ID: "<SEP_T>", SEP_Q_ID: "<SEP_Q>"}
            if i not in names:
                raise AdapterConfigError(f"`ids` must lie in [0, {VOCAB_SIZE}); got {i}")
            out.append(names[i])
    return "".join(out)


# --------------------------------------------------------------------------- DFA


def _dfa_sample(rng: np.random.Generator, n: int, k: int, length: int) -> Batch:
    tables = rng.integers(0, k, size=(n, k, 2))  # (n, k, 2): tables[i, q, b] = delta_i(q, b)
    symbols = rng.integers(0, 2, size=(n, length))  # (n, T) input bits, T = length
    state = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for t in range(length):
        state = tables[rows, state, symbols[:, t]]
    ids = np.concatenate(
        [
            STATE_IDS[0] + tables.reshape(n, 2 * k),  # (n, 2k) table, row-major (q, b)
            np.full((n, 1), SEP_T_ID),
            BIT_IDS[0] + symbols,  # (n, T)
            np.full((n, 1), SEP_Q_ID),
            (STATE_IDS[0] + state)[:, None],  # (n, 1) answer
        ],
        axis=1,
    ).astype(np.int64)
    labels = np.full_like(ids, IGNORE_INDEX)
    labels[:, -1] = ids[:, -1]
    return Batch(torch.from_numpy(ids), torch.from_numpy(labels))


def _check_dfa(k: int, length: int) -> tuple[int, int]:
    k = _check_positive("k", k, 2)
    if k > MAX_STATES:
        raise AdapterConfigError(f"`k` must be <= MAX_STATES = {MAX_STATES}; got {k}")
    return k, _check_positive("length", length)


def dfa_task(n: int, *, k: int, length: int, seed: int) -> Batch:
    """A fixed set of in-context DFA-execution samples (e.g. a test set).

    Each sample draws a fresh random transition table of a k-state DFA over the binary
    alphabet (every entry uniform on the k states), starts in state 0, reads T = ``length``
    uniform random bits and asks for the final state.

    Parameters
    ----------
    n : int
        Number of samples.
    k : int
        Number of states, ``2 <= k <= MAX_STATES``.
    length : int
        Number of input symbols, T.
    seed : int
        Seed; the same ``(n, k, length, seed)`` always gives the same tensors, and the stream
        of :func:`dfa_batches` with the same seed is independent of this set.

    Returns
    -------
    batch : Batch
        ``input_ids`` and ``labels`` of shape ``(n, 2k + T + 3)``.

    Notes
    -----
    Layout of one sample (positions left to right)::

        delta(0,0) delta(0,1) delta(1,0) ... delta(k-1,1)   2k state tokens S_j
        SEP_T                                               1
        x_1 ... x_T                                         T bit tokens BIT0/BIT1
        SEP_Q                                               1
        q_T                                                 1 answer, a state token

    with ``q_0 = 0`` and ``q_t = delta(q_{t-1}, x_t)``. The only label is at the last
    position (predicted from the output at ``SEP_Q``). Chance accuracy is ``1/k``.
    """
    n = _check_positive("n", n)
    k, length = _check_dfa(k, length)
    return _dfa_sample(_rng(seed, _DFA, _FIXED), n, k, length)


def dfa_batches(batch_size: int, *, k: int, length: int, seed: int) -> Iterator[Batch]:
    """An endless stream of fresh DFA batches (for training); layout as :func:`dfa_task`.

    Parameters
    ----------
    batch_size : int
    k, length : int
        As in :func:`dfa_task`.
    seed : int
        Seed of the stream (deterministic; independent of :func:`dfa_task` with this seed).

    Yields
    ------
    batch : Batch
        ``input_ids``, ``labels`` of shape ``(batch_size, 2k + T + 3)``.
    """
    batch_size = _check_positive("batch_size", batch_size)
    k, length = _check_dfa(k, length)
    rng = _rng(seed, _DFA, _STREAM)
    while True:
        yield _dfa_sample(rng, batch_size, k, length)


# --------------------------------------------------------------------------- parity


def _parity_sample(rng: np.random.Generator, n: int, length: int, mode: str) -> Batch:
    bits = rng.integers(0, 2, size=(n, length))  # (n, T), T = length
    if mode == "final":
        answers = bits.sum(axis=1, keepdims=True) % 2  # (n, 1)
    else:
        answers = np.cumsum(bits, axis=1) % 2  # (n, T) running parities
    ids = np.concatenate(
        [BIT_IDS[0] + bits, np.full((n, 1), SEP_Q_ID), BIT_IDS[0] + answers], axis=1
    ).astype(np.int64)
    labels = np.full_like(ids, IGNORE_INDEX)
    labels[:, length + 1 :] = ids[:, length + 1 :]
    return Batch(torch.from_numpy(ids), torch.from_numpy(labels))


def _check_parity(length: int, mode: str) -> int:
    if mode not in ("final", "running"):
        raise AdapterConfigError(f"`mode` must be 'final' or 'running'; got {mode!r}")
    return _check_positive("length", length)


def parity_task(n: int, *, length: int, seed: int, mode: str = "final") -> Batch:
    """A fixed set of long-horizon parity samples (e.g. a test set).

    Parameters
    ----------
    n : int
        Number of samples.
    length : int
        Number of input bits T (uniform random).
    seed : int
        Seed; deterministic, independent of :func:`parity_batches` with the same seed.
    mode : {"final", "running"}
        ``"final"``: one answer, the XOR of all T bits. ``"running"``: T answers, the
        parity of each prefix (the reference's ``2T + 1``-token layout).

    Returns
    -------
    batch : Batch
        ``input_ids``, ``labels`` of shape ``(n, T + 2)`` (final) or ``(n, 2T + 1)``
        (running).

    Notes
    -----
    Layouts (answers are bit tokens, ``p_t = x_1 xor ... xor x_t``)::

        final:    x_1 ... x_T  SEP_Q  p_T
        running:  x_1 ... x_T  SEP_Q  p_1 p_2 ... p_T

    Labels are set at the answer positions only. Chance accuracy is 1/2. In running mode
    the answers are fed back as inputs (teacher forcing), so ``p_t`` is predicted from
    ``p_{t-1}`` and the aligned bit ``x_t`` sits ``T`` positions back.
    """
    n = _check_positive("n", n)
    length = _check_parity(length, mode)
    return _parity_sample(_rng(seed, _PARITY, _FIXED), n, length, mode)


def parity_batches(
    batch_size: int, *, length: int, seed: int, mode: str = "final"
) -> Iterator[Batch]:
    """An endless stream of fresh parity batches (for training); layout as :func:`parity_task`.

    Parameters
    ----------
    batch_size : int
    length : int
        Number of input bits T.
    seed : int
    mode : {"final", "running"}

    Yields
    ------
    batch : Batch
        ``input_ids``, ``labels`` of shape ``(batch_size, T + 2)`` or ``(batch_size, 2T + 1)``.
    """
    batch_size = _check_positive("batch_size", batch_size)
    length = _check_parity(length, mode)
    rng = _rng(seed, _PARITY, _STREAM)
    while True:
        yield _parity_sample(rng, batch_size, length, mode)


def format_batches(
    batch_size: int, *, seq_len: int, seed: int, max_states: int = 8, max_length: int = 64
) -> Iterator[Batch]:
    """An endless stream of packed DFA/parity-format sequences with every answer unsupervised.

    Meant for pretraining a backbone so that it has seen the task tokens and layouts
    without ever being taught a task: each row concatenates random samples (DFA with
    ``k`` uniform in ``[2, max_states]``, or final-mode parity, each with a length uniform in
    ``[1, max_length]``) laid out as in :func:`dfa_task` / :func:`parity_task`, cut to
    ``seq_len``. Every token is a next-token target except the answers, whose labels are
    -100; so table entries, bits and separators are modelled, but the map from prompt to
    answer is not.

    Parameters
    ----------
    batch_size : int
    seq_len : int
        Length of each packed row.
    seed : int
    max_states : int
        Largest DFA state count, ``2 <= max_states <= MAX_STATES``.
    max_length : int
        Largest number of input symbols per sample.

    Yields
    ------
    batch : Batch
        ``input_ids``, ``labels`` of shape ``(batch_size, seq_len)``.
    """
    batch_size = _check_positive("batch_size", batch_size)
    seq_len = _check_positive("seq_len", seq_len, 2)
    max_states, _ = _check_dfa(max_states, 1)
    max_length = _check_positive("max_length", max_length)
    rng = _rng(seed, _FORMAT, _STREAM)
    while True:
        rows_ids, rows_labels = [], []
        for _ in range(batch_size):
            ids: list[torch.Tensor] = []
            labels: list[torch.Tensor] = []
            filled = 0
            while filled < seq_len:
                length = int(rng.integers(1, max_length + 1))
                if rng.random() < 0.5:
                    k = int(rng.integers(2, max_states + 1))
                    sample = _dfa_sample(rng, 1, k, length)
                else:
                    sample = _parity_sample(rng, 1, length, "final")
                ids.append(sample.input_ids[0])
                # the sample's own label marks its answer; the rest are LM targets
                lab = sample.input_ids[0].clone()
                lab[sample.labels[0] != IGNORE_INDEX] = IGNORE_INDEX
                labels.append(lab)
                filled += sample.input_ids.shape[1]
            rows_ids.append(torch.cat(ids)[:seq_len])
            rows_labels.append(torch.cat(labels)[:seq_len])
        yield Batch(torch.stack(rows_ids), torch.stack(rows_labels))


_PRINTABLE = (_ASCII_BASE, VOCAB_SIZE)  # ids of the 95 printable ASCII characters


def _copy_sample(rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
    """``s s "\\n"`` for a uniform random printable string ``s``; labels on the second copy."""
    s = rng.integers(*_PRINTABLE, size=length)
    ids = np.concatenate([s, s, [_NEWLINE_ID]]).astype(np.int64)
    labels = ids.copy()
    labels[:length] = IGNORE_INDEX  # the first copy is noise: nothing to learn there
    return ids, labels


def copy_batches(
    batch_size: int, *, seq_len: int, seed: int, min_length: int = 4, max_length: int = 40
) -> Iterator[Batch]:
    """An endless stream of packed repeated random strings (generic copying data).

    Each row packs segments ``s s "\\n"`` where ``s`` is a string of ``L`` characters drawn
    uniformly from the 95 printable ASCII characters, ``L`` uniform in
    ``[min_length, max_length]``, cut to ``seq_len``. The targets are the second copy and the
    newline (the first copy is unpredictable and unsupervised). It teaches in-context copying
    (induction) and nothing about any task.

    Parameters
    ----------
    batch_size : int
    seq_len : int
        Length of each packed row.
    seed : int
    min_length, max_length : int
        Range of the string lengths, ``1 <= min_length <= max_length``.

    Yields
    ------
    batch : Batch
        ``input_ids``, ``labels`` of shape ``(batch_size, seq_len)``.
    """
    batch_size = _check_positive("batch_size", batch_size)
    seq_len = _check_positive("seq_len", seq_len, 2)
    min_length = _check_positive("min_length", min_length)
    max_length = _check_positive("max_length", max_length, min_length)
    rng = _rng(seed, _COPY, _STREAM)
    while True:
        rows_ids, rows_labels = [], []
        for _ in range(batch_size):
            ids, labels, filled = [], [], 0
            while filled < seq_len:
                a, b = _copy_sample(rng, int(rng.integers(min_length, max_length + 1)))
                ids.append(a)
                labels.append(b)
                filled += len(a)
            rows_ids.append(np.concatenate(ids)[:seq_len])
            rows_labels.append(np.concatenate(labels)[:seq_len])
        yield Batch(torch.from_numpy(np.stack(rows_ids)), torch.from_numpy(np.stack(rows_labels)))


def induction_task(n: int, *, length: int = 20, seed: int) -> Batch:
    """A fixed induction check: a random printable string repeated once, ``s s``.

    Parameters
    ----------
    n : int
        Number of samples.
    length : int
        Characters in ``s``.
    seed : int
        Seed; independent of :func:`copy_batches` with the same seed.

    Returns
    -------
    batch : Batch
        ``input_ids`` of shape ``(n, 2 * length)``; ``labels`` on the ``length`` characters of
        the second copy (the first of them follows the end of the first copy, so it is not
        predictable from the past: the best accuracy is ``(length - 1) / length`` plus chance).
    """
    n = _check_positive("n", n)
    length = _check_positive("length", length)
    rng = _rng(seed, _COPY, _FIXED)
    s = rng.integers(*_PRINTABLE, size=(n, length))
    ids = np.concatenate([s, s], axis=1).astype(np.int64)
    labels = ids.copy()
    labels[:, :length] = IGNORE_INDEX
    return Batch(torch.from_numpy(ids), torch.from_numpy(labels))


def task_baselines(batch: Batch, n_classes: int) -> Baselines:
    """Chance and majority-class accuracy on the answer positions of a labelled set.

    Parameters
    ----------
    batch : Batch
        Typically a test set from :func:`dfa_task` or :func:`parity_task`.
    n_classes : int
        Number of possible answers (``k`` for DFA, 2 for parity).

    Returns
    -------
    baselines : Baselines
    """
    n_classes = _check_positive("n_classes", n_classes)
    answers = batch.labels[batch.labels != IGNORE_INDEX]
    if answers.numel() == 0:
        raise AdapterConfigError("`batch` has no answer positions (all labels are -100)")
    values, counts = torch.unique(answers, return_counts=True)
    best = int(torch.argmax(counts))
    return Baselines(
        chance=1.0 / n_classes,
        majority=float(counts[best]) / answers.numel(),
        majority_label=int(values[best]),
        n_answers=int(answers.numel()),
    )


def dfa_last_symbol_accuracy(batch: Batch, k: int) -> float:
    """Accuracy of a memoryless reading of DFA prompts: the table and the last bit only.

    The rule predicts the state that most states move to on the last input bit,
    ``argmax_j #{q : delta(q, x_T) = j}`` (ties go to the set's majority answer when it is
    among them, else to the smallest state). It needs no state carried across the ``T``
    bits, only a table lookup at the query, so an adapter at or below this rate has not
    shown that it tracks the automaton; for ``k = 2`` it is right whenever both states move
    to the same place on the last bit (half of all tables).

    Parameters
    ----------
    batch : Batch
        DFA samples in the layout of :func:`dfa_task` (task ids, not the character form).
    k : int
        Number of states of the samples.

    Returns
    -------
    accuracy : float

    Examples
    --------
    >>> from benchmarks.hrm.tasks import dfa_last_symbol_accuracy, dfa_task
    >>> test = dfa_task(1000, k=2, length=16, seed=10_000)
    >>> round(dfa_last_symbol_accuracy(test, k=2), 3)
    0.815
    """
    k = _check_positive("k", k, 2)
    ids = batch.input_ids
    n, width = ids.shape
    length = width - 2 * k - 3
    if length < 1 or bool((ids[:, 2 * k] != SEP_T_ID).any()) or bool(
        (ids[:, -2] != SEP_Q_ID).any()
    ):
        raise AdapterConfigError(
            f"`batch` is not a DFA set with k={k}: expected SEP_T at position {2 * k} and "
            f"SEP_Q at position {width - 2} of rows of length {width}"
        )
    table = (ids[:, : 2 * k] - STATE_IDS[0]).reshape(n, k, 2)  # (n, k, 2)
    last = ids[:, -3] - BIT_IDS[0]  # (n,)
    answers = ids[:, -1] - STATE_IDS[0]  # (n,)
    targets = table[torch.arange(n), :, last]  # (n, k): delta(q, x_T) for every q
    counts = torch.nn.functional.one_hot(targets, k).sum(dim=1)  # (n, k)
    majority = int(torch.bincount(answers, minlength=k).argmax())
    tied = counts == counts.max(dim=1, keepdim=True).values  # (n, k)
    pred = torch.where(tied[:, majority], torch.full_like(answers, majority),
                       tied.to(torch.int64).argmax(dim=1))
    return float((pred == answers).double().mean())


# --------------------------------------------------------------------------- text


@dataclass(frozen=True)
class CharCorpus:
    """The character-LM corpus, tokenised and split.

    Attributes
    ----------
    train : torch.Tensor, shape (L_train,), int64
        The first ``1 - val_fraction`` of the text.
    val : torch.Tensor, shape (L_val,), int64
        The remaining tail (contiguous, never seen in training).
    source : str
        Where the text came from.
    """

    train: torch.Tensor
    val: torch.Tensor
    source: str


def char_corpus(val_fraction: float = 0.1) -> CharCorpus:
    """CPython's bundled documentation topics as a character-level corpus.

    The text is ``pydoc_data.topics.topics`` (about 0.46 M characters; ships with every
    CPython), its entries joined in sorted-key order with a blank line between them,
    tokenised with :func:`encode`, and split into a contiguous head (train) and tail (val).

    Parameters
    ----------
    val_fraction : float
        Fraction of characters held out, in ``(0, 1)``.

    Returns
    -------
    corpus : CharCorpus
    """
    if not (isinstance(val_fraction, float) and 0.0 < val_fraction < 1.0):
        raise AdapterConfigError(f"`val_fraction` must be a float in (0, 1); got {val_fraction!r}")
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    ids = encode(text)
    cut = int(round(len(ids) * (1.0 - val_fraction)))
    return CharCorpus(train=ids[:cut], val=ids[cut:], source="pydoc_data.topics")


def lm_batches(
    tokens: torch.Tensor, *, batch_size: int, seq_len: int, seed: int
) -> Iterator[Batch]:
    """An endless stream of random windows of a token stream (for LM training).

    Parameters
    ----------
    tokens : torch.Tensor, shape (L,), int64
    batch_size : int
    seq_len : int
        Window length; ``L`` must exceed it.
    seed : int

    Yields
    ------
    batch : Batch
        ``input_ids == labels``, shape ``(batch_size, seq_len)`` (every position after the
        first is a target).
    """
    batch_size = _check_positive("batch_size", batch_size)
    seq_len = _check_positive("seq_len", seq_len, 2)
    if tokens.ndim != 1 or tokens.numel() <= seq_len:
        raise AdapterConfigError(
            f"`tokens` must be 1-D and longer than seq_len={seq_len}; got shape "
            f"{tuple(tokens.shape)}"
        )
    rng = _rng(seed, _LM, _STREAM)
    offsets = torch.arange(seq_len)
    while True:
        starts = torch.from_numpy(rng.integers(0, tokens.numel() - seq_len + 1, size=batch_size))
        window = tokens[starts[:, None] + offsets]  # (batch_size, seq_len)
        yield Batch(window, window.clone())


def lm_eval_batches(
    tokens: torch.Tensor, *, batch_size: int, seq_len: int, max_batches: int | None = None
) -> list[Batch]:
    """Consecutive non-overlapping windows covering a token stream (for BPC evaluation).

    Parameters
    ----------
    tokens : torch.Tensor, shape (L,), int64
    batch_size, seq_len : int
    max_batches : int or None
        Keep only the first ``max_batches`` batches (None: all full windows).

    Returns
    -------
    batches : list of Batch
        Each of shape ``(<= batch_size, seq_len)``; windows are ``tokens[j*seq_len:
        (j+1)*seq_len]`` in order; a trailing partial window is dropped.
    """
    batch_size = _check_positive("batch_size", batch_size)
    seq_len = _check_positive("seq_len", seq_len, 2)
    n_windows = tokens.numel() // seq_len
    if tokens.ndim != 1 or n_windows == 0:
        raise AdapterConfigError(
            f"`tokens` must be 1-D with at least seq_len={seq_len} entries; got shape "
            f"{tuple(tokens.shape)}"
        )
    windows = tokens[: n_windows * seq_len].reshape(n_windows, seq_len)  # (W, seq_len)
    n_batches = math.ceil(n_windows / batch_size)
    if max_batches is not None:
        n_batches = min(n_batches, _check_positive("max_batches", max_batches))
    return [
        Batch(windows[i * batch_size : (i + 1) * batch_size],
              windows[i * batch_size : (i + 1) * batch_size].clone())
        for i in range(n_batches)
    ]
