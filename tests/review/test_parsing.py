"""The remember sub-agent's output → review items (SPEC §8), from real-looking outputs."""

import json
import re
import time

import pytest
from django.conf import settings as settings_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from review.parsing import (
    MAX_ITEMS,
    MAX_JSON_ATTEMPTS,
    MAX_SUGGESTED_CHARS,
    _last_fenced_blocks,
    fallback_paths,
    normalize_path,
    parse_remember_output,
)

LAYERS = {"user/profile", "project/context", "domain/knowledge"}


def block(recommendations, fence="json"):
    return f"```{fence}\n{json.dumps({'recommendations': recommendations}, indent=2)}\n```"


def rec(path, layer="project/context", rationale="Why it matters.", content="A distilled note."):
    return {"path": path, "recommended_layer": layer, "rationale": rationale, "suggested_memory_content": content}


CLEAN = """```json
{
  "recommendations": [
    {
      "path": "docs/architecture.md",
      "recommended_layer": "project/context",
      "rationale": "Describes the module boundaries between the ingest worker and the API; future tasks in this repo need it.",
      "suggested_memory_content": "Ingest runs as a Celery worker; the API never parses uploads itself. Modules: ingest/, api/, shared/schemas.py."
    },
    {
      "path": "CONTRIBUTING.md",
      "recommended_layer": "user/profile",
      "rationale": "States the user's review preferences: small PRs, imperative commit messages.",
      "suggested_memory_content": "The user wants PRs under 400 lines and commit messages in the imperative mood."
    },
    {
      "path": "billing/rules.py",
      "recommended_layer": "domain/knowledge",
      "rationale": "Encodes the invoicing rule that issued invoices are immutable.",
      "suggested_memory_content": "Issued invoices are never edited; corrections are credit notes."
    }
  ]
}
```"""


def test_clean_block_gives_one_item_per_recommendation_in_order():
    result = parse_remember_output(CLEAN, {"docs/architecture.md": "# Architecture\n", "billing/rules.py": "x = 1\n"})
    assert result.used_fallback is False
    assert [i.path for i in result.items] == ["docs/architecture.md", "CONTRIBUTING.md", "billing/rules.py"]
    assert [i.recommended_layer for i in result.items] == ["project/context", "user/profile", "domain/knowledge"]
    first = result.items[0]
    assert first.rationale.startswith("Describes the module boundaries")
    assert first.suggested_memory_content.startswith("Ingest runs as a Celery worker")
    assert first.source == "json"


def test_sizes_and_texts_come_from_the_uploaded_files():
    result = parse_remember_output(CLEAN, {"docs/architecture.md": "# Architecture\n", "billing/rules.py": "é = 1\n"})
    by_path = {i.path: i for i in result.items}
    assert by_path["docs/architecture.md"].bytes == len(b"# Architecture\n")
    assert by_path["billing/rules.py"].bytes == len("é = 1\n".encode())  # bytes, not characters
    assert by_path["billing/rules.py"].file_text == "é = 1\n"
    assert by_path["CONTRIBUTING.md"].bytes == 0 and by_path["CONTRIBUTING.md"].file_text == ""


def test_block_with_prose_around_it_is_found():
    output = (
        "I inspected the workspace and picked the files worth keeping.\n\n"
        + block([rec("src/app.py"), rec("README.md", "user/profile")])
        + "\n\nSummary for humans: app.py holds the wiring, README.md the user's conventions. "
        "I skipped scratch.py, it is a throwaway."
    )
    result = parse_remember_output(output)
    assert result.used_fallback is False
    assert [i.path for i in result.items] == ["src/app.py", "README.md"]  # scratch.py in the prose is ignored


def test_unlabelled_fence_and_bare_object_also_parse():
    assert parse_remember_output(block([rec("a.md")], fence="")).items[0].path == "a.md"
    bare = 'Result: {"recommendations": [{"path": "b.md", "recommended_layer": "user/profile"}]} done.'
    result = parse_remember_output(bare)
    assert result.used_fallback is False
    assert [(i.path, i.recommended_layer) for i in result.items] == [("b.md", "user/profile")]


def test_broken_block_falls_back_to_paths_in_the_text():
    output = """Here are my picks:
```json
{"recommendations": [
  {"path": "./docs/setup.md", "recommended_layer": "project/context", "rationale": "setup steps",
  {"path": "src/api/routes.ts", "recommended_layer": "domain/knowledge"
]
```
Also worth keeping: config/settings.yaml and ui/Button.tsx (not Button.tsx.orig), see notes.txt."""
    result = parse_remember_output(output, {"docs/setup.md": "pip install -e ."})
    assert result.used_fallback is True
    assert [i.path for i in result.items] == [
        "docs/setup.md",
        "src/api/routes.ts",
        "config/settings.yaml",
        "ui/Button.tsx",
        "notes.txt",
    ]
    assert all(i.recommended_layer == "project/context" for i in result.items)
    assert all(i.suggested_memory_content == "" and i.rationale == "" for i in result.items)
    assert all(i.source == "fallback" for i in result.items)
    assert result.items[0].bytes == len("pip install -e .")


def test_fallback_recognises_each_common_extension():
    names = ["a.md", "b.txt", "c.py", "d.ts", "e.tsx", "f.js", "g.jsx", "h.json", "i.yaml", "j.yml"]
    result = parse_remember_output("Files: " + ", ".join(names) + ". Not: k.rs, l.go, m.pyc")
    assert [i.path for i in result.items] == names


def test_fourteen_items_are_capped_at_ten():
    result = parse_remember_output(block([rec(f"docs/note-{n:02d}.md") for n in range(14)]))
    assert len(result.items) == MAX_ITEMS == 10
    assert [i.path for i in result.items] == [f"docs/note-{n:02d}.md" for n in range(10)]


def test_fallback_is_capped_at_ten_too():
    result = parse_remember_output(" ".join(f"f{n}.py" for n in range(14)))
    assert len(result.items) == 10


def test_bad_layers_are_forced_to_project_context():
    result = parse_remember_output(
        block(
            [
                rec("a.md", "team/knowledge"),
                rec("b.md", None),
                rec("c.md", 42),
                rec("d.md", " User/Profile "),
                rec("e.md", "domain/knowledge"),
                {"path": "f.md"},
            ]
        )
    )
    assert [i.recommended_layer for i in result.items] == [
        "project/context",
        "project/context",
        "project/context",
        "user/profile",
        "domain/knowledge",
        "project/context",
    ]


def test_dot_slash_is_stripped_from_paths():
    result = parse_remember_output(block([rec("./docs/a.md"), rec("././b.py"), rec("  ./c.json ")]))
    assert [i.path for i in result.items] == ["docs/a.md", "b.py", "c.json"]


def test_duplicates_are_dropped_first_wins_also_across_dot_slash():
    result = parse_remember_output(
        block([rec("a.md", "user/profile"), rec("./a.md", "domain/knowledge"), rec("b.md"), rec("a.md")])
    )
    assert [(i.path, i.recommended_layer) for i in result.items] == [
        ("a.md", "user/profile"),
        ("b.md", "project/context"),
    ]


def test_duplicates_in_the_fallback_are_dropped():
    result = parse_remember_output("See a.md, then ./a.md again, and b.py.")
    assert [i.path for i in result.items] == ["a.md", "b.py"]


def test_suggested_content_is_capped_at_800_characters():
    result = parse_remember_output(block([rec("a.md", content="x" * 5000)]))
    assert len(result.items[0].suggested_memory_content) == MAX_SUGGESTED_CHARS == 800


def test_entries_without_a_string_path_are_skipped():
    result = parse_remember_output(block([{"recommended_layer": "user/profile"}, "a.md", {"path": 3}, rec("ok.md")]))
    assert [i.path for i in result.items] == ["ok.md"]


def test_empty_recommendations_give_no_items_without_falling_back():
    result = parse_remember_output("Nothing worth keeping in notes.md.\n" + block([]))
    assert result.items == [] and result.used_fallback is False


def test_nothing_at_all_gives_no_items():
    result = parse_remember_output("I could not find anything durable in this turn.")
    assert result.items == [] and result.used_fallback is True


def test_last_parsable_block_wins():
    output = block([rec("draft.md")]) + "\nRevised:\n" + block([rec("final.md")])
    assert [i.path for i in parse_remember_output(output).items] == ["final.md"]


def test_nul_and_lone_surrogates_are_cleaned_for_the_database():
    output = '```json\n{"recommendations": [{"path": "a\\u0000.md", "rationale": "bad \\ud800 text"}]}\n```'
    [item] = parse_remember_output(output).items
    assert item.path == "a.md"
    assert "\x00" not in item.rationale and "\ud800" not in item.rationale


def test_deeply_nested_json_does_not_crash():
    output = "```json\n" + "[" * 100_000 + "\n```\nsee a.md"
    result = parse_remember_output(output)
    assert [i.path for i in result.items] == ["a.md"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
recommendation = st.fixed_dictionaries(
    {},
    optional={
        "path": st.one_of(st.text(max_size=40), st.sampled_from(["./a.md", "a.md", "b/c.py", ""]), json_values),
        "recommended_layer": st.one_of(st.sampled_from(sorted(LAYERS)), st.text(max_size=20), json_values),
        "rationale": st.one_of(st.text(max_size=50), json_values),
        "suggested_memory_content": st.one_of(st.text(max_size=1200), json_values),
    },
)
structured = st.lists(st.one_of(recommendation, json_values), max_size=16).map(
    lambda recs: f"prose\n```json\n{json.dumps({'recommendations': recs})}\n```\nmore prose"
)
noisy = st.text(alphabet=st.characters(), max_size=400)
fragments = st.lists(
    st.sampled_from(["```", "```json\n", "{", "}", '"recommendations"', ":", "[", "]", "./", "a.md", "\n", ","])
    | noisy,
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    output=st.one_of(noisy, structured, fragments), files=st.dictionaries(st.text(max_size=20), st.text(max_size=50))
)
def test_no_input_crashes_the_parser_and_the_invariants_hold(output, files):
    result = parse_remember_output(output, files)
    assert len(result.items) <= MAX_ITEMS
    paths = [i.path for i in result.items]
    assert len(paths) == len(set(paths))
    for item in result.items:
        assert item.path and not item.path.startswith("./")
        assert item.recommended_layer in LAYERS
        assert len(item.suggested_memory_content) <= MAX_SUGGESTED_CHARS
        assert "\x00" not in item.path + item.rationale + item.suggested_memory_content + item.file_text
        assert item.bytes == len(item.file_text.encode("utf-8"))
        if result.used_fallback:
            assert item.source == "fallback" and item.suggested_memory_content == ""


# --- Linear time (issue 15: the fallback pattern backtracked quadratically) ----------------------
# The patterns before the fix, kept as the reference the linear scans must agree with.
OLD_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
OLD_FALLBACK_PATH = re.compile(
    r"[A-Za-z0-9_./-]+\.(?:md|txt|py|tsx|ts|jsx|json|js|ya?ml)(?![A-Za-z0-9_]|\.[A-Za-z0-9_])"
)
path_soup = st.text(alphabet="a.m/dtxpyjsonl-_ Y\n`{", max_size=60)


@settings(max_examples=500, deadline=None)
@given(text=path_soup)
def test_fallback_paths_agree_with_the_old_pattern(text):
    expected = list(dict.fromkeys(m.group(0) for m in OLD_FALLBACK_PATH.finditer(text)))
    assert list(fallback_paths(text)) == [normalize_path(p) for p in expected]


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="`\nj x{}", max_size=40))
def test_fences_agree_with_the_old_pattern(text):
    expected = [m.group(2) for m in OLD_FENCED.finditer(text)][-MAX_JSON_ATTEMPTS:]
    assert [text[a:b] for a, b in _last_fenced_blocks(text)] == expected


def _worst_cases(size: int) -> dict[str, str]:
    return {
        "dots without a path (the fuzzer's input)": "a." * (size // 2),
        "almost an extension": "a.m" * (size // 3),
        "fence without a newline": "```" + "a" * size,
        "fences on one line": "```x" * (size // 4),
        "a flood of empty fences": "```\n" * (size // 4),
        "a flood of broken JSON blocks": ('```json\n{"recommendations":[\n```') * (size // 32),
        "bare objects nested": '{"recommendations":[' * 500 + "1," * (size // 2 - 5000),
        "bare objects broken": '{"recommendations": [1,' * (size // 24),
        "an absurd number after bare objects": '{"recommendations":[' * 20 + "1," * (size // 2 - 5000) + "9" * 5000,
        "bare objects too deep": '{"recommendations":' * (size // 19),
        "one path repeated": "a.md " * (size // 5),
        "distinct paths": "".join(f"d/{i}.py " for i in range(size // 12)),
        "deep nesting in a fence": "```\n" + "[" * size + "\n```",
        "unterminated quotes": '"\\"' * (size // 3),
    }


@pytest.mark.parametrize("case", list(_worst_cases(10)))
def test_worst_case_output_of_the_largest_allowed_body_parses_quickly(case):
    text = _worst_cases(settings_module.ENGRAM_MAX_BODY_BYTES)[case]
    # The CPU this process spends, not the wall clock: waiting for a core while CI's other worker
    # and PostgreSQL run is not the parser's work (a catastrophic pattern took 26 s of CPU).
    started = time.process_time()
    parse_remember_output(text, {})
    assert time.process_time() - started < 2.0  # about 0.1–0.4 s on a quiet machine (bench/hostile.py)
