"""The Overview's verdict blocks, one per model x hardware, as plain data: the headline, what the
group costs a week, the table with its links and the evidence in full. Built once per kept review
and filters (app/views/overview.py caches it), so a later visit only draws them: the pandas work
and the escaping were most of a warm render of a week with causes."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from compilewatch.app import ui
from compilewatch.app.filters import Filters
from compilewatch.review import wording

MAX_GROUPS = 10   # model x hardware blocks of verdicts drawn in full
ORDER = {"regression": 0, "suspicious": 1, "improvement": 2}
TABLE_COLUMNS = ["status", "metric", "change", "evidence", "compare", "run", "detail"]


@dataclass
class Block:
    headline: str                       # Markdown, escaped
    cost: str | None                    # Markdown caption, escaped; None when nothing is costed
    table: pd.DataFrame                 # TABLE_COLUMNS
    evidence: list[tuple[str, str]] = field(default_factory=list)   # (markdown | code | caption | shell, text)


@dataclass
class Blocks:
    worse: bool                         # anything got worse: the heading says so
    judged: int                         # verdicts that got worse or better
    more: str | None                    # the caption for the groups past MAX_GROUPS (escaped), or None
    blocks: list[Block]


def _links(row, base_f: Filters) -> dict:
    frame = getattr(row, "frame", None)
    out = {"compare": ui.link("compare", base_f, run_id=row.baseline_run, run_b=row.candidate_run,
                              frame=frame if isinstance(frame, str) and frame else None)
           if row.baseline_run and row.candidate_run else None,
           "run": ui.link("run", base_f, run_id=row.candidate_run) if row.candidate_run else None,
           "detail": None}
    if isinstance(row.break_key, str) and row.break_key:
        out["detail"] = ui.link("hotspots", base_f, break_key=row.break_key)
    elif isinstance(row.function, str) and row.function:
        out["detail"] = ui.link("recompiles", base_f, run_id=row.candidate_run, function=row.function)
    return out


def build(verdicts: pd.DataFrame, base_f: Filters) -> Blocks:
    """The blocks for the verdicts that got worse or better, worst group first, then by what the
    group's regressions cost a week (review/cost.py): the fix that pays most first."""
    judged = verdicts[verdicts["status"].isin(list(ORDER))]
    # a review kept by an older version has no cost column
    cost = judged["cost_s"] if "cost_s" in judged else pd.Series(0.0, index=judged.index)
    ranked = judged.assign(_rank=judged["status"].map(ORDER), _cost=pd.to_numeric(cost, errors="coerce").fillna(0.0))
    keys = ranked.groupby(["model", "hardware"], sort=False).agg(_rank=("_rank", "min"), _cost=("_cost", "sum"))
    groups = keys.sort_values(["_rank", "_cost"], ascending=[True, False], kind="stable")["_rank"]
    more = None
    # The worst groups in full; past MAX_GROUPS (an organisation's week can judge hundreds of models)
    # the rest are counted and left to the filters and the report: every group drawn is sent along.
    if len(groups) > MAX_GROUPS:
        rest = groups.iloc[MAX_GROUPS:]
        more = (f"The {MAX_GROUPS} worst of {len(groups)} model × hardware groups are shown; "
                f"{int((rest == 0).sum())} more with regressions, {int((rest == 1).sum())} with suspicious changes "
                f"and {int((rest == 2).sum())} with improvements are in the report below, or pick models in the sidebar.")
        groups = groups.iloc[:MAX_GROUPS]
    by_group = dict(iter(ranked.groupby(["model", "hardware"], sort=False)))
    blocks = []
    for model, hw in groups.index:
        part = by_group[(model, hw)].sort_values(["_rank", "_cost"], ascending=[True, False], kind="stable")
        part = part.reset_index(drop=True)
        # links for the rows drawn only: a week of an organisation judges hundreds of rows
        links = pd.DataFrame([_links(r, base_f) for r in part.itertuples()], columns=["compare", "run", "detail"])
        part = pd.concat([part, links], axis=1)
        why = part["cause"] if "cause" in part else pd.Series(None, index=part.index)
        shown = part.assign(evidence=[c if isinstance(c, str) and c else " · ".join(t for _, t, _ in ev)
                                      for c, ev in zip(why, part["evidence"])])
        total = part["_cost"].sum()
        block = Block(headline=f"**{ui.md(part['headline'].iloc[0])}**",
                      cost=(f"What these regressions cost: {ui.md(wording.per_week(total))} "
                            f"(extra compile seconds times the runs, extra step time times the steps).")
                      if total > 0 else None,
                      table=shown[TABLE_COLUMNS].reset_index(drop=True))
        for row in part.itertuples():
            block.evidence.append(("markdown", f"**{ui.md(row.status.capitalize())}: {ui.md(row.metric)}** "
                                               f"({ui.md(row.change)}) — {ui.md(row.summary)}"))
            if isinstance(getattr(row, "cause", None), str) and row.cause:
                block.evidence.append(("markdown", f"- **cause**: {ui.md(row.cause)}"
                                       + (f" — costs {ui.md(row.cost)}" if isinstance(getattr(row, "cost", None), str) else "")))
            for kind, text, hint in row.evidence:
                block.evidence.append(("markdown", f"- {ui.md(kind.replace('_', ' '))}: {ui.md(text)}"
                                       + (f" — *fix:* {ui.md(hint)}" if isinstance(hint, str) and hint else "")))
            if isinstance(row.command, str) and row.command:
                block.evidence.append(("shell", row.command))
            if isinstance(row.diff_command, str) and row.diff_command:
                block.evidence.append(("caption", "See what changed in the compiler (or open Compare and its compile diff):"))
                block.evidence.append(("code", row.diff_command))
        blocks.append(block)
    worse = bool(judged["status"].isin(["regression", "suspicious"]).any())
    return Blocks(worse=worse, judged=len(judged), more=more, blocks=blocks)
