"""Push tokens (store/tokens.py) on both stores: made, verified, revoked; only a salted hash kept."""
from __future__ import annotations

import pytest

from compilewatch.core.errors import InputError, NotFoundError
from compilewatch.store import tokens


@pytest.fixture(params=["embedded", "ducklake"])
def any_store(request):
    return request.getfixturevalue("store" if request.param == "embedded" else "lake_store")


def test_tokens_are_verified_revoked_and_never_stored(any_store):
    made, secret = tokens.add(any_store, "ci-llm")
    other, other_secret = tokens.add(any_store, "alice")
    assert secret.startswith(f"cwp_{made.token_id}_") and made.name == "ci-llm" and made.revoked_at is None
    assert tokens.verify(any_store, secret).token_id == made.token_id
    assert tokens.verify(any_store, other_secret).name == "alice"
    with any_store.read() as con:
        kept = " ".join(str(v) for row in con.execute("SELECT * FROM push_tokens").fetchall() for v in row)
    assert secret.split("_", 2)[2] not in kept and other_secret.split("_", 2)[2] not in kept
    # another token's secret under this id, a changed character, a missing token: each refused, saying why
    forged = f"cwp_{made.token_id}_{other_secret.split('_', 2)[2]}"
    for bad, why in ((forged, "not known"), (secret[:-1] + ("A" if secret[-1] != "A" else "B"), "not known"),
                     (None, "no push token"), ("Bearer x", "malformed")):
        with pytest.raises(tokens.Refused, match=why):
            tokens.verify(any_store, bad)
    assert tokens.revoke(any_store, secret).revoked_at is not None       # by the whole token, too
    with pytest.raises(tokens.Refused, match=f"push token {made.token_id} \\(ci-llm\\) was revoked"):
        tokens.verify(any_store, secret)
    assert tokens.verify(any_store, other_secret).name == "alice"        # the others still work
    assert [(t.name, t.revoked_at is not None) for t in sorted(tokens.listed(any_store), key=lambda t: t.name)] == \
        [("alice", False), ("ci-llm", True)]
    with pytest.raises(NotFoundError):
        tokens.revoke(any_store, "0123456789abcdef")
    with pytest.raises(InputError):
        tokens.add(any_store, "  ")
