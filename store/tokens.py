"""Push tokens: who may send runs to the team server over HTTP (table push_tokens, migration 021).

A token reads ``cwp_<id>_<secret>``: the id (16 hex digits) names it in `compilewatch token list`
and `revoke` and in the server's answers; the secret (43 URL-safe characters, 256 random bits) is
shown once, when the token is made, and never stored. The store keeps a random salt and
sha256(salt + secret) per token, and `verify` compares digests in constant time. A plain SHA-256
suffices where a password would need a slow hash: the secret is random, so there is nothing to
guess from a leaked digest.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from compilewatch.core.errors import InputError, NotFoundError

PREFIX = "cwp_"
_SHAPE = re.compile(r"^cwp_(?P<id>[0-9a-f]{16})_(?P<secret>[A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class Token:
    token_id: str
    name: str
    created_at: datetime
    revoked_at: datetime | None


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def add(store, name: str) -> tuple[Token, str]:
    """Make a token for `name` (a team or a user). Returns the row and the token itself, which
    exists nowhere else afterwards."""
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise InputError(f"{name!r} cannot name a token", "give the team or user it is for, e.g. `token add ci-llm`")
    token_id, secret, salt = secrets.token_hex(8), secrets.token_urlsafe(32), secrets.token_hex(16)
    for attempt in store.transactions(bump_version=False):
        with attempt as con:
            con.execute("INSERT INTO push_tokens (token_id, name, salt, secret_sha256) VALUES (?, ?, ?, ?)",
                        [token_id, name, salt, _digest(salt, secret)])
    return _one(store, token_id), f"{PREFIX}{token_id}_{secret}"


def listed(store) -> list[Token]:
    """Every token ever made, the newest first; revoked ones say since when."""
    with store.read() as con:
        rows = con.execute("SELECT token_id, name, created_at, revoked_at FROM push_tokens "
                           "ORDER BY created_at DESC, token_id").fetchall()
    return [Token(*r) for r in rows]


def revoke(store, token_id: str) -> Token:
    """End a token (its id, or the whole token): from now on the server refuses it."""
    m = _SHAPE.match(token_id.strip())
    token_id = m["id"] if m else token_id.strip()
    found = _one(store, token_id)
    if found.revoked_at is None:
        for attempt in store.transactions(bump_version=False):
            with attempt as con:
                con.execute("UPDATE push_tokens SET revoked_at = current_timestamp WHERE token_id = ? "
                            "AND revoked_at IS NULL", [token_id])
    return _one(store, token_id)


class Refused(Exception):
    """A token the server will not take; the message is the reason sent back."""


def verify(store, token: str | None) -> Token:
    """The live token that `token` is, or Refused with why not."""
    if not token:
        raise Refused("no push token: send it as 'Authorization: Bearer <token>' "
                      "(compilewatch push reads COMPILEWATCH_PUSH_TOKEN or --token-file)")
    m = _SHAPE.match(token.strip())
    if not m:
        raise Refused("the push token is malformed (a token reads cwp_<id>_<secret>, as `compilewatch token add` "
                      "printed it)")
    with store.read() as con:
        rows = con.execute("SELECT token_id, name, created_at, revoked_at, salt, secret_sha256 FROM push_tokens "
                           "WHERE token_id = ?", [m["id"]]).fetchall()
    # Every row is compared, and in constant time, so an answer's timing tells nothing of the secret.
    match = [r for r in rows if hmac.compare_digest(_digest(r[4], m["secret"]), r[5])]
    if not match:
        raise Refused(f"push token {m['id']} is not known to this server (a wrong token, or one made for "
                      "another store)")
    token_row = Token(*match[0][:4])
    if token_row.revoked_at is not None:
        raise Refused(f"push token {m['id']} ({token_row.name}) was revoked at {token_row.revoked_at:%Y-%m-%d %H:%M} UTC")
    return token_row


def _one(store, token_id: str) -> Token:
    with store.read() as con:
        rows = con.execute("SELECT token_id, name, created_at, revoked_at FROM push_tokens WHERE token_id = ?",
                           [token_id]).fetchall()
    if not rows:
        raise NotFoundError(f"no push token {token_id!r} in this store", "`compilewatch token list` shows them")
    return Token(*rows[0])
