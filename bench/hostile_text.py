"""The write classifier's worst-case texts (issue 33): every token class the readers of
memory/classifier/ know, repeated to a given length.

A fact may be 16,000 characters long (agents/operations/serializers.py), and a reading that is
quadratic on repetitive input spent over 24 s of CPU on one such fact ("a a a …", "1,1,1,…",
"every a …"), holding the GIL all along. `texts(size)` gives one text per class: each unit the
quantity patterns, the tokeniser, the name and negation readers, the phrase folding and the
order, bound and contrast readers look for (words, stop and weak words, numbers and number
words, "1,1,1", "every a", times words, units, money, dates, months, clock times, cron lines,
frequencies, fractions, "per", negations and contractions, polar and bound words, steps,
contrasts, identifiers, versions, ports, names, acronyms, code spans, phrases, percentiles),
repeated; long runs without a space; whitespace and punctuation floods; and a seeded mix of all
the units. Pure Python without Django: bench/hostile.py measures them, and
tests/memory/test_classifier_hostile.py asserts their CPU time.
"""

from __future__ import annotations

import random

SIZES = (1_000, 4_000, 16_000)
MAX_FACT_CHARS = 16_000

# One unit per token class; a text is its unit repeated (and cut) to the size asked.
UNITS: dict[str, str] = {
    # words and tokens
    "a word": "a ",
    "a letter": "x ",
    "a stop word": "the ",
    "a weak word": "use ",
    "a content word": "deploy ",
    "distinct words": "",  # generated: w0 w1 w2 …
    "a capitalised name": "Alice ",
    "an acronym": "CPU ",
    "distinct acronyms": "",  # generated: AB AC AD …
    "a code span": "`x` ",
    "an identifier": "a_b.c-d ",
    "a hyphen compound": "night-shift ",
    "a path": "/a/b ",
    "a mention": "@a ",
    "a contraction": "don't ",
    "an apostrophe run": "a'",
    "a possessive": "Bob's ",
    # numbers and number words
    "a digit": "1 ",
    "1,1,1": "1,",
    "1.1.1": "1.",
    "a thousands number": "1,000 ",
    "a decimal": "1.5 ",
    "a number word": "one ",
    "number words": "one two ",
    "a tens number": "twenty-five ",
    "a hundred": "a hundred ",
    "a dozen": "dozen ",
    "every a": "every a ",
    "every number": "every 2 ",
    "every unit": "every 2 hours ",
    "each day": "each day ",
    "every other": "every other ",
    # times words
    "once": "once ",
    "twice a day": "twice a day ",
    "n times": "3 times ",
    "n times a week": "3 times a week ",
    "word times": "one times ",
    "nx": "2x ",
    "times daily": "twice daily ",
    "a times word": "times ",
    # units, money, percentages
    "a duration": "5 ms ",
    "a size": "1 gb ",
    "a length": "10 km ",
    "a percentage": "5% ",
    "percent": "3 percent ",
    "per cent": "3 per cent ",
    "thousands": "1k ",
    "money": "$1,",
    "money k": "€1k ",
    "a unit alone": "hours ",
    "a fraction": "half an hour ",
    "three quarters": "three quarters of a ",
    "a word unit": "five-minute ",
    "a unit joined": "4-space ",
    # dates and times of day
    "a day of month": "1 jan ",
    "a month day": "jan 1 ",
    "a date range": "jan 1-2 ",
    "an ordinal date": "1st march 2024 ",
    "an ISO date": "2024-01-01 ",
    "a month": "until june ",
    "a clock time": "10:00 ",
    "a clock run": "1:1",
    "am pm": "10 p.m. ",
    "am run": "a.m",
    "noon": "noon ",
    "a cron line": "`0 2 * * *` ",
    "a weekday": "tuesdays ",
    # frequencies and rates
    "a frequency word": "daily ",
    "per": "per day ",
    "a slash unit": "/h ",
    "a day": "a day ",
    "a day slashed": "a day/day",
    "an hour": "an hour ",
    "within an hour": "within an hour ",
    # negations, polarity, bounds, hedges
    "a negation": "not ",
    "never": "never ",
    "can't": "can't ",
    "n't": "isn't ",
    "not only": "not only ",
    "a polar word": "enabled ",
    "a negative polar word": "disabled ",
    "is off": "is off ",
    "at least": "at least ",
    "max": "max ",
    "a hedge": "may ",
    "also": "also ",
    "now": "now ",
    "like": "like ",
    # order, steps, contrasts
    "then": "then ",
    "an arrow": "a -> b ",
    "a numbered step": "1) a ",
    "a dotted step": "1. a ",
    "before": "before a ",
    "after": "a after b ",
    "until": "until a ",
    "a contrast": "x over y ",
    "not a name": "Kafka, not RabbitMQ ",
    "from to": "from Postgres to MySQL ",
    "rather than": "rather than ",
    # identifiers and versions
    "a version": "v1.2.3 ",
    "a dotted version": "3.12 ",
    "a version min": "3.12 min ",
    "a region": "us-east-1 ",
    "a port": ":8080 ",
    "a setting": "LOG_LEVEL=debug ",
    "a ticket": "#1201 ",
    "a percentile": "99th percentile ",
    "an email": "a@b.c ",
    "a url": "https://a.b/c ",
    # phrases, synonyms, abbreviations
    "a phrase": "pull request ",
    "a long phrase": "end of the day ",
    "e.g.": "e.g. ",
    "w/o": "w/o ",
    "used to": "used to ",
    # separators and characters
    "a full stop": ". ",
    "commas": ", ",
    "semicolons": "; ",
    "colons": ": ",
    "equals": "= ",
    "a dash": "- ",
    "an em dash": "— ",
    "an arrow character": "→ ",
    "a non-ASCII letter": "é ",
    "newlines": "\n",
    "tabs": "\t",
    "parentheses": "(1) ",
    "a section sign": "§A ",
}
# Runs without a space: one long word, number, identifier or run of separators.
RUNS: dict[str, str] = {
    "one long word": "a",
    "one long number": "1",
    "a long hyphenated run": "a-",
    "a long dotted run": "a.",
    "a long underscore run": "a_",
    "a long colon run": "a:",
    "a long slash run": "a/",
    "a long at run": "a@",
    "a long hash run": "#a",
    "a long run of spaces": " ",
    "a long run of dashes": "-",
    "a long run of commas": ",",
    "a long run of digits and commas": "1,1",
    "a long run of apostrophes": "a'",
}


def repeated(unit: str, size: int) -> str:
    """`unit` repeated to exactly `size` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def _generated(label: str, size: int) -> str:
    if label == "distinct words":
        return repeated(" ".join(f"w{i}" for i in range(size)), size)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return repeated(" ".join(a + b for a in letters for b in letters if a != b), size)


def mix(size: int, seed: int = 33) -> str:
    """Every unit, in a seeded random order, to `size` characters."""
    rng = random.Random(seed)
    units = [u for u in UNITS.values() if u]
    parts: list[str] = []
    length = 0
    while length < size:
        unit = rng.choice(units)
        parts.append(unit if unit.endswith((" ", "\n", "\t")) else unit + " ")
        length += len(parts[-1])
    return "".join(parts)[:size]


def texts(size: int) -> dict[str, str]:
    """Each class's text at `size` characters (the maximum fact length is MAX_FACT_CHARS)."""
    out = {label: _generated(label, size) if not unit else repeated(unit, size) for label, unit in UNITS.items()}
    out.update({label: repeated(unit, size) for label, unit in RUNS.items()})
    out["a mix of every class"] = mix(size)
    return out


# The live facts of the topic a hostile text is read against: ordinary facts with numbers, names,
# negations, dates and steps — each pair then runs every part of the comparison.
TOPIC_FACTS = (
    "Production deploys happen on Tuesdays at 10:00 after the standup.",
    "The payments service timeout is 30 seconds; retries back off twice a day at most.",
    "Never deploy on Fridays: the on-call engineer is not available before Monday.",
    "Backups run every 6 hours and are kept for 30 days in s3, encrypted.",
    "First run the migrations, then restart the web workers, then clear the cache.",
    "We use Kafka, not RabbitMQ, for events; the v1.2.3 client reads from us-east-1.",
)
