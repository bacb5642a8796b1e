"""The verdict: what got worse or better between a baseline and a candidate, since when, and why.

Plain functions over the store (no streamlit, no torch), read alike by the dashboard, `compilewatch
report` and `compilewatch check`. Data moves one way through it:

    series   per model x hardware x metric values of each run, with the metric's direction
    baseline which runs are the baseline and which the candidate (SPEC strings, time windows)
    detect   noise-aware ratio rules and new-key rules -> Verdict (carrying its evidence)
    changepoints  when a series moved (ruptures + a significance test) and what changed there
    weekly   puts the above together into one Review
    report   renders a Review as self-contained HTML or Markdown; computes nothing
"""
