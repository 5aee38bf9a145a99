"""API keys: format, keyed hash, constant-time check, the server secret."""

import os
import stat

import pytest

from rcll.access import keys
from rcll.config import Settings


def test_generate_format_and_uniqueness():
    made = [keys.generate() for _ in range(200)]
    assert len({k for k, _ in made}) == 200 and len({p for _, p in made}) == 200
    for key, prefix in made:
        assert keys.KEY_PATTERN.fullmatch(key)
        assert keys.prefix_of(key) == prefix and len(prefix) == 12


@pytest.mark.parametrize("bad", ["", "rcll_", "rcll_abc_def", "Bearer x", None, 42,
                                 "rcll_0123456789ab_" + "a" * 42, "rcll_0123456789AB_" + "a" * 43])
def test_prefix_of_malformed(bad):
    assert keys.prefix_of(bad) is None


def test_hash_is_keyed_and_verifies():
    key, _ = keys.generate()
    h1 = keys.hash_key(b"s" * 32, key)
    assert h1.startswith("hmac-sha256$") and len(h1) == len("hmac-sha256$") + 64
    assert key not in h1
    assert keys.verify(b"s" * 32, key, h1)
    assert not keys.verify(b"t" * 32, key, h1)          # another server secret
    assert not keys.verify(b"s" * 32, key[:-1] + ("A" if key[-1] != "A" else "B"), h1)


def test_server_secret_generated_once(tmp_path):
    s = Settings(state_dir=tmp_path)
    first = keys.server_secret(s)
    assert len(first) == 32 and keys.server_secret(s) == first
    mode = stat.S_IMODE(os.stat(tmp_path / keys.SECRET_FILE).st_mode)
    assert mode == 0o600
    assert keys.server_secret(Settings(state_dir=tmp_path, key_secret="x" * 40)) == b"x" * 40
    with pytest.raises(ValueError):
        keys.server_secret(Settings(state_dir=tmp_path, key_secret="short"))
