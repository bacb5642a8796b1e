"""The table of review/cache_miss.py's misses (app/queries/compare.py: misses_frame), drawn alike by
Compare (run A against run B) and Run detail (the run before against this one)."""
from compilewatch.app import ui


def table(misses, key: str, empty: str, side_a: str, side_b: str) -> None:
    columns = {"compile_id_a": ui.text_col(f"Id {side_a}", "small"), "compile_id_b": ui.text_col(f"Id {side_b}", "small"),
               "compiled_frame": ui.text_col("Frame", "medium"), "cache": ui.text_col("Cache", "small"),
               "graph": ui.text_col("Graph", "small"), "outcome": ui.text_col(f"{side_a} → {side_b}", "small"),
               "parts": ui.text_col("Key parts that differed", "medium"), "why": ui.text_col("Why", "large"),
               "changes": ui.text_col(f"Components {side_a} → {side_b}", "large")}
    ui.table(misses, key=key, empty=empty, **columns)
