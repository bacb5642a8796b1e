"""The stack trie of a run, as tlparse draws it: the user frames (from each ``dynamo_start``) that
lead to every compile, with each compile id marked where its frame ends, together with what
happened to it: a recompile and its first failed guard, graph breaks, a failure, a restart."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from compilewatch.deepdive import artifacts
from compilewatch.store.run_rows import run_filter

_ATTEMPT = re.compile(r"_\d+$")


@dataclass
class Mark:
    compile_id: str
    rank: int | None
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        head = f"[{self.compile_id}]" + (f" rank {self.rank}" if self.rank is not None else "")
        return head + "".join(f" · {n}" for n in self.notes)


@dataclass
class Node:
    frame: str = ""
    children: dict = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)


def base_id(compile_id: str | None) -> str | None:
    """A compile id without its attempt suffix: restarts of one compile are one compile here."""
    return _ATTEMPT.sub("", compile_id) if compile_id else compile_id


def frame_text(fr: dict) -> str:
    return f"{fr.get('filename') or '?'}:{fr.get('line', '?')} in {fr.get('name') or '?'}"


def _one_line(text, n: int = 120) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _notes(con, run_id: str) -> dict:
    """(base compile id, rank) -> notes, from the compiles, recompiles and graph_breaks tables."""
    notes: dict = {}
    run = run_filter(con, run_id)
    cur = con.cursor()
    try:
        for cid, rank, fail_type, attempt in cur.execute(
                f"SELECT compile_id, rank, fail_type, attempt FROM compiles WHERE {run} ORDER BY line_no",
                [run_id]).fetchall():
            n = notes.setdefault((base_id(cid), rank), [])
            if fail_type and f"failed: {fail_type}" not in n:
                n.append(f"failed: {_one_line(fail_type, 80)}")
            if attempt and "restarted" not in n:
                n.append("restarted")
        for cid, rank, reason in cur.execute(
                f"SELECT compile_id, rank, reason FROM recompiles WHERE {run} ORDER BY line_no",
                [run_id]).fetchall():
            notes.setdefault((base_id(cid), rank), []).insert(0, "recompile" + (f": {_one_line(reason)}" if reason else ""))
        for cid, rank, gb_type, reason, ufile, uline in cur.execute(
                "SELECT compile_id, rank, gb_type, reason_norm, user_file, user_line FROM graph_breaks "
                f"WHERE {run} ORDER BY line_no", [run_id]).fetchall():
            where = f" at {ufile}:{uline}" if ufile else ""
            notes.setdefault((base_id(cid), rank), []).append(f"graph break: {_one_line(gb_type or reason, 80)}{where}")
    finally:
        cur.close()
    return notes


def build(con, run_id: str) -> Node:
    """The run's trie; the root holds no frame. Each compile id is marked once per rank."""
    root = Node()
    notes = _notes(con, run_id)
    seen = set()
    for cid, rank, frames in artifacts.stacks(con, run_id):
        key = (base_id(cid), rank)
        if key in seen:
            continue
        seen.add(key)
        node = root
        for fr in frames:
            if not isinstance(fr, dict):
                continue
            text = frame_text(fr)
            node = node.children.setdefault(text, Node(text))
        node.marks.append(Mark(key[0] or "?", rank, list(notes.get(key, []))))
    return root


def render(root: Node) -> str:
    """The trie as indented text (box-drawing branches), one frame or compile id per line."""
    lines: list[str] = []

    def walk(node: Node, prefix: str) -> None:
        items = [("mark", m) for m in node.marks] + [("node", c) for c in node.children.values()]
        for i, (what, item) in enumerate(items):
            last = i == len(items) - 1
            branch, cont = ("└─ ", "   ") if last else ("├─ ", "│  ")
            if what == "mark":
                lines.append(prefix + branch + item.text())
            else:
                lines.append(prefix + branch + item.frame)
                walk(item, prefix + cont)

    walk(root, "")
    return "\n".join(lines)


def count_marks(root: Node) -> int:
    return len(root.marks) + sum(count_marks(c) for c in root.children.values())
