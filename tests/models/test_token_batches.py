"""Write-path embed batches formed by token count, longest first (rcll.models.batching)."""

import numpy as np

from rcll.models.batching import token_batches


def test_batches_sort_longest_first_and_keep_every_index_once():
    lengths = [12, 256, 7, 256, 40, 9, 256, 31]
    out = token_batches(lengths, max_tokens=600, max_batch=4)
    assert out == [[1, 3], [6, 4], [7, 0, 5, 2]]  # 2 x 256 = 512; 3 x 256 > 600
    assert sorted(i for b in out for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in out for i in b]
    assert flat == sorted(lengths, reverse=True)


def test_padded_size_and_count_stay_within_the_bounds():
    lengths = [5 * (i % 50) + 1 for i in range(300)]
    for batch in token_batches(lengths, max_tokens=1024, max_batch=16):
        assert len(batch) <= 16
        assert len(batch) * max(lengths[i] for i in batch) <= 1024


def test_a_text_longer_than_the_budget_goes_alone_and_zero_means_count_only():
    assert token_batches([900, 10, 10], max_tokens=500, max_batch=8) == [[0], [1, 2]]
    assert token_batches([300, 300, 300], max_tokens=0, max_batch=2) == [[0, 1], [2]]
    assert token_batches([], max_tokens=100, max_batch=4) == []


def test_token_batched_vectors_match_plain_batches_in_input_order():
    from rcll.models.embedder import SentenceTransformerEmbedder

    texts = ["short one", "word " * 300, "a middle sized sentence about the library " * 4,
             "tiny", "word " * 120, "another short text"]
    plain = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=16, batch_tokens=0)
    sized = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=16, batch_tokens=300)
    lengths = sized.token_lengths(texts)
    assert lengths[1] == 256 and lengths[3] == 3  # capped at the window; [CLS] tiny [SEP]
    a, b = plain.embed(texts), sized.embed(texts)
    assert a.shape == b.shape == (6, 384) and b.dtype == np.float32
    assert np.allclose(a, b, atol=1e-5)
