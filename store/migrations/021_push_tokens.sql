-- Who may push runs over HTTP (`compilewatch push`, the team server's /api/push): one row per token,
-- made by `compilewatch token add` for a team or a user and ended by `compilewatch token revoke`.
-- Only a salted SHA-256 of each token's secret is kept (store/tokens.py); the token itself is shown
-- once, when it is made. A revoked token keeps its row, so `token list` still says who it was for.
-- No key: token ids are random (64 bits) and written by one command at a time.
CREATE TABLE push_tokens (
    token_id        VARCHAR NOT NULL,
    name            VARCHAR NOT NULL,
    salt            VARCHAR NOT NULL,
    secret_sha256   VARCHAR NOT NULL,
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    revoked_at      TIMESTAMP
);
