"""SFT batches: whole conversations packed into windows, targets on the assistant's tokens only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from marin.data import tinystories_qa
from marin.data.chat_template import render_chat
from marin.posttrain.chat_batches import PackedChats, render_conversations, shifted_targets
from marin.training.models import LlamaConfig
from marin.training.models.layers import IGNORE_INDEX

TWO_TURNS = [
    {"role": "user", "content": "Who found the kite?"},
    {"role": "assistant", "content": "Lily"},
    {"role": "user", "content": "Where?"},
    {"role": "assistant", "content": "in the park"},
]


@pytest.fixture(scope="module")
def tokenizer(chat_tokenizer_dir):
    return AutoTokenizer.from_pretrained(chat_tokenizer_dir)


def test_the_loss_is_the_mean_negative_log_likelihood_of_the_replies_computed_by_hand(tokenizer):
    rendered = render_conversations(tokenizer, [TWO_TURNS], tokenizer.eos_token_id, max_tokens=256)
    ids, is_target = rendered.conversation(0)
    tokens = torch.from_numpy(ids[None])
    targets = torch.from_numpy(shifted_targets(ids, is_target)[None])
    torch.manual_seed(0)
    model = LlamaConfig(32, 64, 2, 4, vocab_size=len(tokenizer), max_seq_len=256, init_std=0.2).build()
    logits = model(tokens[:, :-1])
    loss, _ = model(tokens[:, :-1], targets)  # the model's own loss, which skips IGNORE_INDEX targets

    # by hand: the reply tokens of both assistant turns (their <|eot_id|> included), each predicted from
    # everything before it, and nothing else
    replies = [
        tokenizer.encode(t, add_special_tokens=False) for t in ("Lily<|eot_id|>", "in the park<|eot_id|>")
    ]
    positions = [p for p in range(1, len(ids)) if is_target[p]]
    assert [int(ids[p]) for p in positions] == replies[0] + replies[1]
    logp = torch.log_softmax(logits[0].double(), -1)
    by_hand = -sum(logp[p - 1, int(ids[p])] for p in positions) / len(positions)
    assert abs(loss.item() - by_hand.item()) < 1e-6


def test_changing_a_user_turn_changes_no_target(tokenizer):
    other = [dict(m) for m in TWO_TURNS]
    other[0]["content"] = "Can you tell me who it was that found the kite in the end?"
    a, b = (render_conversations(tokenizer, [c], tokenizer.eos_token_id, 256) for c in (TWO_TURNS, other))
    ta = shifted_targets(*a.conversation(0))
    tb = shifted_targets(*b.conversation(0))
    assert ta[ta != IGNORE_INDEX].tolist() == tb[tb != IGNORE_INDEX].tolist()
    assert len(ta) != len(tb)


def test_windows_hold_whole_conversations_and_a_restored_state_continues_exactly(tokenizer):
    conversations = [tinystories_qa.conversation(i) for i in range(12)]
    data = render_conversations(tokenizer, conversations, tokenizer.eos_token_id, max_tokens=1025)
    lengths = np.diff(data.offsets)
    eos = tokenizer.eos_token_id
    loader = PackedChats(data, seq_len=1024, batch_size=2, seed=3, eos_id=eos)
    seen = []
    for _ in range(4):
        tokens, mask = loader.next_windows()
        for row, flags in zip(tokens, mask, strict=True):
            # every conversation starts right after an EOS (or the window's start) and is whole
            ends = np.flatnonzero(row == eos)
            starts = [0] + [int(e) + 1 for e in ends[:-1]]
            for s in starts:
                if s < len(row) and row[s] != eos:
                    n = next(int(e) for e in ends if e >= s) - s + 1
                    assert n in lengths
                    seen.append(n)
            assert not flags[row == eos].any()
    assert len(seen) >= 12  # more than an epoch went by
    state = loader.state_dict()
    after = [loader.next_windows() for _ in range(3)]
    again = PackedChats(data, seq_len=1024, batch_size=2, seed=3, eos_id=eos)
    again.load_state_dict(state)
    for (t1, m1), (t2, m2) in zip(after, [again.next_windows() for _ in range(3)], strict=True):
        assert np.array_equal(t1, t2) and np.array_equal(m1, m2)


def test_a_conversation_longer_than_a_window_is_cut_and_counted(tokenizer):
    story = tinystories_qa.conversation(0)
    rendered = render_chat(tokenizer, story)
    first_reply_end = int(np.flatnonzero(rendered.assistant)[0]) + 4  # past the first reply's first tokens
    data = render_conversations(tokenizer, [story, TWO_TURNS], tokenizer.eos_token_id, first_reply_end)
    assert data.truncated == 1 and data.dropped == 0
    assert np.diff(data.offsets)[0] == first_reply_end
    assert render_chat(tokenizer, TWO_TURNS).ids.size + 1 == np.diff(data.offsets)[1]


def test_a_conversation_cut_before_its_first_reply_is_left_out_and_counted(tokenizer):
    data = render_conversations(
        tokenizer, [tinystories_qa.conversation(0), TWO_TURNS], tokenizer.eos_token_id, 100
    )
    assert (data.truncated, data.dropped) == (1, 1)
    assert len(data.offsets) == 2  # only TWO_TURNS is left
