"""review.diff: word-level diffs rendered with <ins>/<del>, always escaped."""

from django.template import Context, Template
from hypothesis import given
from hypothesis import strategies as st

from review.diff import diff_stats, render_inline, render_side_by_side, tokenize, word_diff


def test_a_changed_word_is_deleted_then_inserted():
    assert render_inline("PRs under 400 lines", "PRs under 300 lines") == "PRs under <del>400</del><ins>300</ins> lines"


def test_added_and_removed_words_keep_the_whitespace():
    assert render_inline("keep it small", "keep it very small") == "keep it <ins>very </ins>small"
    assert render_inline("keep it very small", "keep it small") == "keep it <del>very </del>small"


def test_identical_texts_have_no_markup():
    assert render_inline("same text", "same text") == "same text"


def test_everything_is_escaped_including_changed_parts():
    html = render_inline("<b>old</b> & co", '<script>alert("x")</script> & co')
    assert "<script" not in html and "<b>" not in html and '"' not in html
    assert "&lt;<del>b</del><ins>script</ins>&gt;" in html and "&quot;x&quot;" in html and "&amp; co" in html


def test_side_by_side_shows_deletions_left_and_insertions_right():
    left, right = render_side_by_side("deploy on Friday", "deploy on Tuesday")
    assert left == "deploy on <del>Friday</del>"
    assert right == "deploy on <ins>Tuesday</ins>"


def test_stats_count_words_not_whitespace():
    assert diff_stats("a b c", "a x y c") == {"added": 2, "removed": 1}


def test_the_template_tags_render_safe_escaped_html():
    template = Template(
        "{% load review_diff %}{% inline_diff old new %}|{% side_by_side_diff old new as pair %}{{ pair.1 }}"
    )
    html = template.render(Context({"old": "a <i>b</i>", "new": "a <i>c</i>"}))
    assert "<del>b</del><ins>c</ins>" in html and "&lt;i&gt;" in html and "<i>" not in html


@given(st.text(max_size=200), st.text(max_size=200))
def test_the_ops_rebuild_both_texts(old, new):
    assert "".join(tokenize(old)) == old
    ops = word_diff(old, new)
    assert "".join(op.text for op in ops if op.kind != "insert") == old
    assert "".join(op.text for op in ops if op.kind != "delete") == new


# --- Bounded work (issue 15): two 16,000-character facts took over a minute ---------------------
def _long_cases() -> dict[str, tuple[str, str]]:
    import random

    rng = random.Random(15)
    n = 16_000

    def pick(alphabet: str, count: int, sep: str) -> str:
        return sep.join(rng.choice(alphabet) for _ in range(count))

    prose = " ".join(f"Sentence {i} says the deploy window is {i % 7} hours." for i in range(n // 45))
    edited = prose.replace("Sentence 100 says", "Sentence 100 now says").replace("is 3 hours", "is 4 hours")
    return {
        "repetitive words": (pick("abcde", n // 2, " "), pick("abcde", n // 2, " ")),
        "punctuation": (pick(".,;:!?", n, ""), pick(".,;:!?", n, "")),
        "many sentences": (pick("abcde", n // 3, ". "), pick("abcde", n // 3, ". ")),
        "many lines": (pick("ab", n // 2, "\n"), pick("ab", n // 2, "\n")),
        "edited prose": (prose, edited),
    }


def test_diffs_of_the_longest_facts_do_bounded_work_and_rebuild_both_texts(monkeypatch):
    """The work is counted, not timed: every comparison difflib is handed (len(a) × len(b) pairs)
    stays within the budget, once for the sentences and once for their words (about 0.01–0.05 s
    a diff; `python -m bench.hostile` times the parsers on worst-case inputs)."""
    import difflib

    from review.diff import WORD_PAIRS_BUDGET

    handed: list[int] = []

    class Counted(difflib.SequenceMatcher):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            handed.append(len(a) * len(b))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", Counted)
    for name, (old, new) in _long_cases().items():
        handed.clear()
        ops = word_diff(old, new)
        assert sum(handed) <= 2 * WORD_PAIRS_BUDGET, (name, sum(handed))
        assert "".join(op.text for op in ops if op.kind != "insert") == old, name
        assert "".join(op.text for op in ops if op.kind != "delete") == new, name


def test_a_small_edit_in_a_long_text_is_still_shown_word_by_word():
    old, new = _long_cases()["edited prose"]
    changed = [op for op in word_diff(old, new) if op.kind != "equal"]
    assert {op.text.strip() for op in changed} <= {"now", "3", "4"}
