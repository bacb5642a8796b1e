"""Every setting of compilewatch, declared once: name, environment variable, secrets key, default, help.

The CLI, the dashboard and the README test all read this table (datasette keeps its settings the
same way). A value resolves: environment variable, then the ``[compilewatch]`` section of
``.streamlit/secrets.toml`` (dashboard only; the app passes that section in), then the default.

This module is a leaf: it imports nothing of compilewatch, ingest, collectors or app, so each of
them may read it. Adding a setting is one ``Setting(...)`` entry below, plus its README row (the
README test names any that is missing).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

SECTION = "compilewatch"   # [compilewatch] in .streamlit/secrets.toml


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str
    secret: bool = True    # also read from .streamlit/secrets.toml [compilewatch] <name>
    option: str = ""       # the command-line option that overrides it, if any


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "db", "COMPILEWATCH_DB", ".compilewatch/compilewatch.duckdb",
        "The store: a DuckDB file (its folder also holds raw/, every ingested file, and inbox/), or a "
        "DuckLake team store as ducklake:postgres:<libpq connection string> with data_path. The "
        "dashboard reads it and the CLI writes it.",
        option="--db",
    ),
    Setting(
        "data_path", "COMPILEWATCH_DATA_PATH", "",
        "With a DuckLake db (ducklake:postgres:<libpq connection string>): the folder, shared by every "
        "host, or the object-storage prefix s3://BUCKET/PREFIX (credentials from the AWS_* variables), "
        "that holds the store's Parquet data, raw/ and inbox/. Unused for a database file.",
        option="--data-path",
    ),
    Setting(
        "lock_timeout", "COMPILEWATCH_LOCK_TIMEOUT", "120",
        "Seconds a reader or writer waits for the store lock before giving up with a message.",
        secret=False,
    ),
    Setting(
        "archive_max_bytes", "COMPILEWATCH_ARCHIVE_MAX_BYTES", str(8 * 2**30),
        "Most bytes one uploaded or ingested archive (nested archives included) may unpack to; "
        "unpacking stops at the cap and nothing of the archive is stored. 8 GiB fits a multi-rank job's traces.",
        secret=False,
    ),
    Setting(
        "archive_max_entries", "COMPILEWATCH_ARCHIVE_MAX_ENTRIES", "20000",
        "Most files and folders one archive (nested archives included) may hold.",
        secret=False,
    ),
    Setting(
        "archive_max_ratio", "COMPILEWATCH_ARCHIVE_MAX_RATIO", "200",
        "Most an archive may expand relative to its own size once past 64 MiB (logs compress 10-40x; "
        "a decompression bomb 1000x).",
        secret=False,
    ),
    Setting(
        "archive_max_depth", "COMPILEWATCH_ARCHIVE_MAX_DEPTH", "3",
        "How deep archives inside archives are unpacked; one nested deeper fails with its reason.",
        secret=False,
    ),
    Setting(
        "upload_max_total_mb", "COMPILEWATCH_UPLOAD_MAX_TOTAL_MB", "4096",
        "Most MiB one Upload-page ingest takes in all; files past it are listed as failed with the reason "
        "(each file is also capped by Streamlit's server.maxUploadSize in .streamlit/config.toml).",
    ),
    Setting(
        "push_max_mb", "COMPILEWATCH_PUSH_MAX_MB", "1024",
        "Most MiB one `compilewatch push` may send to the team server (its packed body); a larger push is "
        "refused with HTTP 413 and the reason, before anything is queued.",
        secret=False,
    ),
    Setting(
        "push_max_files", "COMPILEWATCH_PUSH_MAX_FILES", "2000",
        "Most files one push may carry (bundles' files and loose logs together); more is refused with HTTP 413.",
        secret=False,
    ),
    Setting(
        "push_server", "COMPILEWATCH_SERVER", "",
        "The team server `compilewatch push` sends to, e.g. http://compilewatch.example.internal:8501.",
        secret=False, option="--server",
    ),
    Setting(
        "push_token", "COMPILEWATCH_PUSH_TOKEN", "",
        "The push token `compilewatch push` sends (made by `compilewatch token add` on the server); never "
        "given on the command line, where other users' `ps` would see it. --token-file reads it from a file instead.",
        secret=False,
    ),
    Setting(
        "listen_address", "COMPILEWATCH_LISTEN_ADDRESS", "127.0.0.1",
        "Address `compilewatch dashboard` listens on: 127.0.0.1 lets only this machine in; a team server "
        "sets 0.0.0.0 (or one interface) and puts login (st.login) or a reverse proxy in front.",
        secret=False, option="--address",
    ),
    Setting(
        "sample_logs", "COMPILEWATCH_SAMPLE_LOGS", "sample_logs",
        "Folder ingested once when the dashboard starts on an empty database, so a newcomer sees real data.",
    ),
    Setting(
        "bootstrap", "COMPILEWATCH_BOOTSTRAP", "1",
        "Set to 0 to skip ingesting sample_logs on first start (an empty database then shows how to add data).",
    ),
    Setting(
        "host_probe", "COMPILEWATCH_HOST_PROBE", "1",
        "Set to 0 to skip the host probe `compilewatch collect` times before and after each job (a short "
        "fixed workload in a process of its own: the evidence the review reads before it puts a slower "
        "step down to the machine).",
        secret=False, option="--no-probe",
    ),
    Setting(
        "review_refresh", "COMPILEWATCH_REVIEW_REFRESH", "1",
        "Set to 0 to leave the Overview's kept review to its next visitor: otherwise `ingest`, `inbox` "
        "(the push API's and dashboard's workers) and the upload page compute it for the Overview's "
        "default view right after their runs are stored, so no visitor waits for it.",
        secret=False,
    ),
    # -- the weekly review's detection (review/rules.py reads these; README lists them) --------------
    Setting(
        "review_baseline", "COMPILEWATCH_REVIEW_BASELINE", "previous",
        "A pinned baseline SPEC (e.g. label=release-1.4,torch=2.13) used by the report, the Overview and "
        "`check` when no --baseline is given; 'previous': the window before the candidate's.",
    ),
    Setting("review_speedup_min_ratio", "COMPILEWATCH_REVIEW_SPEEDUP_MIN_RATIO", "0.95",
            "A run is flagged when its speedup falls below this fraction of the baseline median."),
    Setting("review_compile_time_max_ratio", "COMPILEWATCH_REVIEW_COMPILE_TIME_MAX_RATIO", "1.15",
            "A run is flagged when its compile time exceeds the baseline median by this factor."),
    Setting("review_step_time_max_ratio", "COMPILEWATCH_REVIEW_STEP_TIME_MAX_RATIO", "1.05",
            "A run is flagged when a compiled callable's steady step time exceeds the baseline median by this factor."),
    Setting("review_iteration_time_max_ratio", "COMPILEWATCH_REVIEW_ITERATION_TIME_MAX_RATIO", "1.05",
            "A run is flagged when its iteration (training-step) period exceeds the baseline median by this factor."),
    Setting("review_peak_memory_max_ratio", "COMPILEWATCH_REVIEW_PEAK_MEMORY_MAX_RATIO", "1.05",
            "A run is flagged when its peak memory exceeds the baseline median by this factor."),
    Setting("review_count_max_ratio", "COMPILEWATCH_REVIEW_COUNT_MAX_RATIO", "1.0",
            "Graph breaks, recompiles, limit hits, failures: the factor over the baseline median a run may "
            "reach (1.0: any rise past the baseline runs' range is flagged)."),
    Setting("review_noise_sigmas", "COMPILEWATCH_REVIEW_NOISE_SIGMAS", "3",
            "A change smaller than this many run-to-run standard deviations (pooled over both sides, and at "
            "least a run median's error from its steps' spread) is noise and never reported."),
    Setting("review_consecutive", "COMPILEWATCH_REVIEW_CONSECUTIVE", "2",
            "Flagged candidate runs in a row that make a regression; fewer make it suspicious. A lone "
            "candidate run (a CI job) is judged against the baseline's spread alone."),
    Setting("review_group_max_pvalue", "COMPILEWATCH_REVIEW_GROUP_MAX_PVALUE", "0.05",
            "Several candidate runs that all lie beyond every baseline run (exact one-sided Mann-Whitney "
            "p at most this) and pass the ratio rule on their median are a regression even when no two "
            "of them pass the noise rule on their own."),
    Setting("review_min_baseline_runs", "COMPILEWATCH_REVIEW_MIN_BASELINE_RUNS", "2",
            "Baseline runs needed to judge a timing; fewer give 'insufficient data' (counts need one run)."),
    Setting("review_cold_cache_drop", "COMPILEWATCH_REVIEW_COLD_CACHE_DROP", "0.25",
            "A compile-time rise whose candidate hit the compile caches this much less often (0..1) than the "
            "baseline is put down to a cold cache: suspicious, not a regression."),
    Setting("review_paired_min_ratio", "COMPILEWATCH_REVIEW_PAIRED_MIN_RATIO", "1.5",
            "Compile time with one run a side in each cache state (a version's cold first run and warm second): "
            "each state's run is judged against the other side's run in the same state, and a move that every "
            "state makes past its ratio rule is a regression when each state also moved this far (x), with no "
            "run-to-run spread to measure the noise; less far, suspicious."),
    Setting("review_changepoint_max_pvalue", "COMPILEWATCH_REVIEW_CHANGEPOINT_MAX_PVALUE", "0.05",
            "Significance level of the Welch t-test that confirms each change point."),
    Setting("review_changepoint_penalty", "COMPILEWATCH_REVIEW_CHANGEPOINT_PENALTY", "3",
            "ruptures PELT penalty (times log n) on the noise-normalised series; higher finds fewer change points."),
    Setting("review_changepoint_min_size", "COMPILEWATCH_REVIEW_CHANGEPOINT_MIN_SIZE", "2",
            "Fewest runs on either side of a change point."),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def get(name: str, secrets: Mapping | None = None) -> str:
    """The value of a setting: environment, then `secrets` (the [compilewatch] section), then default."""
    s = BY_NAME[name]
    value = os.environ.get(s.env)
    if value:
        return value
    if secrets is not None and s.secret:
        value = secrets.get(name)
        if value not in (None, ""):
            return str(value)
    return s.default


class SettingError(ValueError):
    """A setting holds a value of the wrong kind (the message names the variable and the value)."""


def get_float(name: str, secrets: Mapping | None = None) -> float:
    raw = get(name, secrets)
    try:
        return float(raw)
    except ValueError:
        raise SettingError(f"{BY_NAME[name].env}={raw!r} is not a number "
                           f"(default {BY_NAME[name].default})") from None


def is_on(name: str, secrets: Mapping | None = None) -> bool:
    return get(name, secrets).strip().lower() not in ("0", "false", "no", "off", "")
