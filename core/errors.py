"""Every typed error compilewatch raises, in one place so that every package can raise and catch
them without importing another. Each carries a one-line title and a hint that names the fix; the CLI and the
dashboard print both instead of a traceback."""
from __future__ import annotations


class CompileWatchError(Exception):
    """Base of every error compilewatch raises on purpose."""

    hint: str = ""

    def __init__(self, title: str, hint: str | None = None):
        super().__init__(title)
        self.title = title
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.title} (hint: {self.hint})" if self.hint else self.title


class InputError(CompileWatchError):
    """A path or upload that cannot be read as a log, bundle or archive."""


class BundleError(InputError):
    """A bundle whose manifest is missing or malformed."""


class StoreError(CompileWatchError):
    """The DuckDB store cannot be opened, migrated or written."""


class StoreCorruptError(StoreError):
    """DuckDB refuses the database file: a block's checksum does not match its content. `torn` is
    the block (store/torn_block.TornBlock) when DuckDB said which one."""

    hint = "restore the database file from a backup, or ingest the logs again into a new store"

    def __init__(self, title: str, hint: str | None = None, torn=None):
        super().__init__(title, hint)
        self.torn = torn


class StoreBusyError(StoreError):
    hint = "another process is writing; it retries automatically, or try again in a moment"


class StoreUnreachableError(StoreError):
    """The team store's PostgreSQL did not answer (down, wrong host or port, firewall)."""

    hint = ("check that PostgreSQL is running and the host and port in --db / COMPILEWATCH_DB; "
            "pages work again as soon as it is back")


class StoreLoginError(StoreError):
    """PostgreSQL answered and refused the login (user, password, pg_hba.conf) or has no such database."""

    hint = "check user=, password= (or ~/.pgpass) and dbname= in --db / COMPILEWATCH_DB, and that the database exists"


class CatalogConflictError(StoreError):
    """Creating or migrating the DuckLake catalog collided with another process doing the same."""

    hint = "run the command again: the other process has finished initialising the store"


class SchemaNewerError(StoreError):
    """The store was migrated by a newer compilewatch: this version does not know all of its schema."""

    hint = "upgrade compilewatch on this host (pip install -U compilewatch) to the version that wrote the store"


class ObjectStoreError(StoreError):
    """The store's S3 data path (s3://bucket/prefix) cannot be reached, read or written: no or wrong
    credentials, no such bucket, an endpoint that does not answer."""

    hint = ("check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and AWS_REGION "
            "(or AWS_PROFILE) and the bucket in --data-path")


class StrictModeError(CompileWatchError):
    """--strict was given and some lines could not be parsed."""

    hint = "drop --strict to store what parsed, or look at the errors listed above"



# -- the review -----------------------------------------------------------------------------------
class SpecError(CompileWatchError):
    """A --baseline / --candidate SPEC or a --since window that cannot be read."""

    hint = ("SPEC is KEY=VALUE, repeatable or comma-separated, KEY one of label, torch, commit, run, "
            "hardware, model (e.g. --baseline label=v1 --candidate label=v2,model=llama)")


class PushError(CompileWatchError):
    """`compilewatch push` could not deliver its runs: the server refused them (the reason it gave is
    the title) or could not be reached."""


class PostError(CompileWatchError):
    """The report could not be delivered to the webhook given with --post."""


# -- the deep dive --------------------------------------------------------------------------------
class NotFoundError(InputError):
    """A run, compile id or artifact that is not in the store."""


# -- the collector --------------------------------------------------------------------------------
class CollectError(CompileWatchError):
    """The collector could not start or finish a run."""


class OutputNotWritableError(CollectError):
    hint = "pass --out with a folder you can write to"


class TorchMissingError(CollectError):
    hint = "install torch into that interpreter (pip install 'compilewatch[collect]' or a CUDA build of torch)"


class UnknownModelError(CollectError):
    hint = "run `compilewatch bench --list-models` to see the built-in models"


class ModelUnavailableError(CollectError):
    """A built-in model whose package (torchvision, timm, transformers) is not installed."""


class CommandNotFoundError(CollectError):
    hint = "check the command after `--` (is it on PATH, or does it need `python` in front?)"
