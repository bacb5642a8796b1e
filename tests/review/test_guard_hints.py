"""Every guard category the normaliser can produce has its own fix hint: a new category without
one fails here instead of falling back to the generic hint in the dashboard and the report."""
from compilewatch.ingest.normalize import CATEGORIES
from compilewatch.review.hints import GUARD_HINTS


def test_every_guard_category_has_a_hint_and_no_hint_is_orphaned():
    assert set(CATEGORIES) == set(GUARD_HINTS), (set(CATEGORIES) ^ set(GUARD_HINTS))
    assert all(len(GUARD_HINTS[c]) > 40 for c in CATEGORIES)
