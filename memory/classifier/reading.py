"""Reading a text once (cached): its content tokens — stop words dropped, abbreviations and
synonyms folded, words stemmed — plus what is read apart: quantities (memory.classifier.quantities),
polarity, bounds, hedges, the order of steps, "x over y" preferences; and the reading budget that
bounds what any text costs (issue 33).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from dataclasses import dataclass

from memory.classifier.quantities import Qty, extract_quantities, unmark
from memory.classifier.vocabulary import (
    ADDITIVE,
    AUXILIARIES,
    BOUND,
    CONTRASTS,
    COPULAS,
    DAYS,
    ENVS,
    HEDGES,
    IRREGULAR,
    KNOWN_NAMES,
    LIKE_SUBJECTS,
    MAX_PHRASE,
    NEGATORS,
    ORDER_WORDS,
    PHRASES,
    POLAR,
    STOP,
    SYNONYMS,
    UPDATE,
    WEAK,
)


def normalise(text: str) -> str:
    """Lower-cased, whitespace-collapsed, without trailing punctuation: equal means restated."""
    return " ".join(text.lower().split()).rstrip(".!;, ")


# ---------------------------------------------------------------- reading a text


@dataclass
class Token:
    key: str  # what is compared: folded, stemmed, or the quantity's dimension ("q:time")
    kind: str  # word, name, id, env, day or qty
    surface: str  # as written (lower case), for reasons
    qty: Qty | None = None
    capital: bool = False  # a capitalised word opening a sentence: perhaps a name ("Dana is…")
    weak: bool = False  # claims little ("use", "lives", "user"): never counted as a difference
    acronym: bool = False  # written in capitals (CPU, RTO)
    listed: bool = False  # an item of a list: next to a token of its type across `,` / and / or
    at: int = 0  # its place among the words read


@dataclass
class Reading:
    tokens: list[Token]  # content tokens, in order
    sign: int  # +1 affirms, -1 denies: the parity of negations and negative words
    polar: list[str]  # the words that set the sign
    bounds: set[int]  # +1 a lower bound (at least, above), -1 an upper one (max, under)
    steps: list[set[str]] | None  # its clauses in the order they happen (None: fewer than two)
    explicit: bool  # it states an order: then, first, next, 1) 2), before, after, once, until
    possible: bool  # it hedges or scopes: may, can, sometimes, partly, except…
    verb_at: int  # where its first is / are / was / has… stands among the words read (10**6: none)
    preferred: frozenset[tuple[str, str]]  # (x, y) for "x over y" / "x, not y"; (x, "→") for "from x"
    update: bool  # now / instead / only / no longer: the text revises an earlier claim
    only: bool  # only / sole: the text may narrow a list ("accepts OAuth tokens only")
    additive: bool  # also / another: the text adds to an earlier claim
    past: bool  # was / were: a past event, so another date is another event
    id_parts: set[str]  # the parts of its identifiers (`CACHE_TTL`: cache, ttl)
    words: tuple[str, ...]  # the words read, which tokens' `at` point into


TYPED = frozenset({"name", "id", "env", "day", "qty"})


def typed(t: Token) -> bool:
    """A value a claim can be about or set: a number, a name, an identifier, an environment, a day."""
    return t.kind in TYPED


TOKEN = re.compile(r"§[A-Z]+|[#@$/]?[^\W_][\w.:/+#@'-]*[\w+#/]|[^\W_]|[:;,]")
RAW_WORD = re.compile(r"[^\W\d_][\w.:/+#-]*[\w+#]|[^\W\d_]")
ID_SEPARATORS = re.compile(r"[-_./:#@=]")


def _stem(word: str) -> str:
    """A light suffix stripper: enough for plurals, tenses and -ly/-ment/-al derivations."""
    if word in IRREGULAR:
        return IRREGULAR[word]
    if not word.isalpha() or len(word) <= 3:
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif (w.endswith("ing") and len(w) >= 6) or (w.endswith("ed") and len(w) >= 5 and not w.endswith("eed")):
        w = w[: -3 if w.endswith("ing") else -2]
    elif (w.endswith("ly") and len(w) >= 6) or (w.endswith("ee") and len(w) >= 6):
        w = w[:-2]
    elif w.endswith("ment") and len(w) >= 8:
        w = w[:-4]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if w.endswith("al") and len(w) >= 7:
        w = w[:-2]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


_KNOWN_STEMS = frozenset(_stem(n) for n in KNOWN_NAMES if n.isalpha())
_STEMMED_POLAR = {_stem(w): w for w in [*NEGATORS, *POLAR] if w.isalpha() and len(w) > 3}


def _prepare(text: str) -> str:
    t = text.replace("–", "-").replace("—", " - ").replace("’", "'").replace("→", " then ").replace("->", " then ")
    t = re.sub(r"\b([ap])\.m\.", r"\1m", t, flags=re.I)
    t = re.sub(r"\bw/o\b", "without", t, flags=re.I)
    t = re.sub(r"\bnot only\b", " ", t, flags=re.I)  # "not only JSON but also XML" = "JSON and XML"
    t = re.sub(r"\bbut also\b", "and", t, flags=re.I)
    t = re.sub(r"\bw/(?=\s)", "with", t, flags=re.I)
    t = re.sub(r"\b(e\.g\.|i\.e\.|approx\.|etc\.|vs\.)", " ", t, flags=re.I)
    t = re.sub(r"(?<![\w).:/-])\(?\d\)\s*", " ; step ", t)  # "1) stop writes": numbered steps
    t = re.sub(r"(?:^|(?<=\s))\d\.\s+(?=[A-Za-z])", " ; step ", t)  # "1. stop the app"
    t = re.sub(r"(?<![\w:]):(\d{2,5})\b", r"port \1", t)  # ":8080"
    t = re.sub(r"(?<![\w.:/-])(\d+)-([A-Za-z]{3,})\b", r"\1 \2", t)  # "4-space indent", "3-day"
    t = re.sub(r"\b(\d{2})(?:st|nd|rd|th)[- ]percentile\b", r"p\1", t, flags=re.I)  # "99th percentile"
    t = re.sub(r"(?<=\w)=(?=\w)", " = ", t)  # "LOG_LEVEL=debug"
    t = re.sub(r"\bcan't\b", "can not", t, flags=re.I)
    t = re.sub(r"\bwon't\b", "will not", t, flags=re.I)
    t = re.sub(r"\bused to\b", "formerly", t, flags=re.I)
    t = re.sub(r"\b(\w+)n't\b", r"\1 not", t, flags=re.I)
    t = re.sub(r"\bcannot\b", "can not", t, flags=re.I)
    return t


def _names(text: str) -> tuple[set[str], set[str], set[str]]:
    """Proper names (capitalised words past a sentence's start, acronyms, code spans), the
    capitalised words that open a sentence (names perhaps), and the acronyms."""
    names: set[str] = set()
    openers: set[str] = set()
    acronyms: set[str] = set()
    for span in re.findall(r"`([^`]+)`", text):
        names.update(span.lower().split())
    for sentence in re.split(r"(?<=[.!?:;])\s+", text):
        for index, m in enumerate(RAW_WORD.finditer(sentence)):
            word = m.group(0)
            if len(word) >= 2 and sum(c.isupper() for c in word) >= 2:
                acronyms.add(word.lower())
                names.add(word.lower())
            elif index > 0 and word[0].isupper():
                names.add(word.lower())
            elif index == 0 and word[0].isupper():
                openers.add(word.lower())
    return names, openers - names, acronyms


def _fold_phrases(raw: list[str]) -> list[str]:
    words: list[str] = []
    i = 0
    while i < len(raw):
        for size in range(min(MAX_PHRASE, len(raw) - i), 0, -1):
            key = PHRASES.get(tuple(raw[i : i + size]))
            if key:
                words.append(key)
                i += size
                break
        else:
            words.append(raw[i])
            i += 1
    return words


@functools.lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """Read a text once (cached: the write path compares each live fact with every proposal)."""
    prepared = _prepare(text)
    names, openers, acronyms = _names(prepared)
    lowered, qtys = extract_quantities(prepared.lower().replace("`", " "))
    raw: list[str] = []
    for w in TOKEN.findall(lowered):
        w = w.strip("'").removesuffix("'s")
        if "-" in w and w not in names and w not in SYNONYMS and w not in POLAR and re.fullmatch(r"[a-z-]+", w):
            raw.extend(p for p in w.split("-") if p)  # "night-shift", "third-party"
        elif w:
            raw.append(w)
    words = _fold_phrases(raw)
    tokens: list[Token] = []
    negations = 0
    polar: list[str] = []
    bounds: set[int] = set()
    update = only = additive = past = False
    contrasts: list[int] = []
    explicit = False
    for index, word in enumerate(words):
        nxt = words[index + 1] if index + 1 < len(words) else ""
        prev = words[index - 1] if index else ""
        if word.startswith("§"):
            q = qtys[unmark(word)]
            if q.dim == "count" and nxt.isalpha() and nxt not in STOP and nxt not in WEAK:
                q = Qty(q.dim, q.value, _stem(SYNONYMS.get(nxt, nxt)), q.surface)  # "3 replicas"
            last = tokens[-1] if tokens else None
            if (
                q.dim == "time"
                and last is not None
                and last.qty is not None
                and last.qty.dim == "time"
                and last.qty.value > q.value
                and (last.at == index - 1 or (last.at == index - 2 and prev == "and"))
            ):  # "2 hours 30 minutes" is one duration
                merged = Qty("time", last.qty.value + q.value, "", f"{last.qty.surface} {q.surface}")
                tokens[-1] = Token("q:time", "qty", merged.surface, merged, at=index)
                continue
            tokens.append(Token(f"q:{q.dim}", "qty", q.surface, q, at=index))
            continue
        if word in (":", ";", ",", "="):
            continue
        if word == "last" and nxt.startswith("§"):
            continue  # "sprints last two weeks": a duration, not the last step
        if word in ("after", "before", "until") and nxt.startswith("§"):
            bounds.add(1 if word == "after" else -1)  # "within 5 days" ≠ "after 5 days"
            continue
        if word in ORDER_WORDS:
            explicit = True
            if word not in ("first", "second", "third", "last"):
                continue
        if word in ADDITIVE and (word not in ("too", "well") or nxt in ("", ",", ";", ".")):
            additive = True
            continue
        if word in UPDATE:
            # "deploy only after the tests pass" states a condition, not a narrowed claim
            if not (word == "only" and nxt in ("after", "before", "once", "when", "if", "until")):
                update = True
                only = only or word in ("only", "sole", "solely")
            if word in ("now", "instead", "only", "sole", "solely", "anymore", "longer"):
                continue
        past = past or word in ("was", "were", "formerly", "previously")
        if word not in NEGATORS and word not in POLAR and _stem(word) in _STEMMED_POLAR:
            word = _STEMMED_POLAR[_stem(word)]  # "avoids", "forbids", "excludes"
        if word in NEGATORS:
            if word == "not" and (nxt in names or nxt.startswith("§")):
                contrasts.append(index)
                continue  # "Kafka, not RabbitMQ" contrasts a name; it does not deny the sentence
            negations += 1
            polar.append(word)
        elif word == "on" and prev in COPULAS and nxt in ("", ",", ";", "in", "for", "at", "by", "on", "and", "but"):
            polar.append(word)  # "DEBUG is on in staging"
        elif word == "off" and (prev in COPULAS or prev in (":", "=")):
            negations += 1  # "DEBUG is off in prod", not "a day off"
            polar.append(word)
        elif word == "like" and prev not in LIKE_SUBJECTS:
            continue  # "like `order_items`" gives an example
        elif word in POLAR:
            negations += POLAR[word][1] < 0
            polar.append(word)
        elif word in CONTRASTS and not nxt.startswith("§") and prev not in BOUND:
            contrasts.append(index)  # "email over Slack", "Postgres rather than MongoDB"
        elif word in BOUND:
            bounds.add(BOUND[word])
        elif word not in STOP or (word in names and len(word) > 1 and word != "i"):  # "US" is no "us"
            token = token_of(word, names, openers)
            token.acronym = word in acronyms
            token.at = index
            tokens.append(token)
    # "don't deploy until the tests pass" = "deploy only after they pass"; "won't be back before
    # March" = "away until March": a negation bound to until/before is a time bound, not a denial
    if negations % 2 and (
        "until" in words or any(w == "before" and n.startswith("§") for w, n in itertools.pairwise(words))
    ):
        negations -= 1
    if any(t.kind == "day" and t.key not in ("weekday", "weekend") for t in tokens):
        # "weekly on Thursdays" = "every Thursday" = "on Thursdays"
        tokens = [t for t in tokens if not (t.qty and t.qty.dim == "freq" and math.isclose(t.qty.value, 1 / 7))]
    ids = {p for t in tokens if t.kind == "id" for p in ID_SEPARATORS.split(t.key) if p}
    for x, y in itertools.pairwise(tokens):
        if set(words[x.at + 1 : y.at]) & {",", "and", "or"}:
            x.listed = y.listed = True
    steps = _steps(words, names)
    preferred = set()
    for t in tokens:  # "from Postgres to MySQL" / "from MySQL to Postgres"
        role = words[t.at - 1] if t.at else ""
        if typed(t) and role in ("from", "to", "into", "onto"):
            preferred.add((t.key, "→" if role == "from" else "←"))
    strong = [t for t in tokens if not t.weak]  # in the order read: `at` ascends
    places = [t.at for t in strong]
    for at in contrasts:  # the strong tokens either side of "over", "not", "rather than"…
        before, after = bisect.bisect_left(places, at), bisect.bisect_right(places, at)
        if before and after < len(strong):
            preferred.add((strong[before - 1].key, strong[after].key))
    possible = any(w in HEDGES for w in words)  # "can" and "cannot" alike: the negation is the polarity
    verb_at = next((k for k, w in enumerate(words) if w in AUXILIARIES), 10**6)
    return Reading(
        tokens=tokens,
        sign=-1 if negations % 2 else 1,
        polar=polar,
        bounds=bounds,
        steps=steps,
        explicit=explicit,
        possible=possible,
        verb_at=verb_at,
        preferred=frozenset(preferred),
        update=update,
        only=only,
        additive=additive,
        past=past,
        id_parts=ids,
        words=tuple(words),
    )


def token_of(word: str, names: set[str], openers: set[str]) -> Token:
    key = SYNONYMS.get(word, word)
    if key in ENVS:
        return Token(key, "env", word)
    day = DAYS.get(key) or DAYS.get(_stem(key))
    if day:
        return Token(day, "day", word)
    if word == "go" and word in names:  # "written in Go", not "deploys go out"
        return Token("golang", "name", word)
    if word in WEAK or key in WEAK:
        return Token(_stem(key), "word", word, weak=True)
    if key in KNOWN_NAMES or _stem(key) in _KNOWN_STEMS:
        return Token(_stem(key) if key.isalpha() else key, "name", word)
    if any(c.isdigit() for c in key) or any(c in key for c in "_./:#@") or (word in names and "-" in word):
        return Token(key, "id", word)
    if word in names:
        return Token(_stem(key) if key.isalpha() else key, "name", word)
    stemmed = _stem(key)
    key = SYNONYMS.get(stemmed, stemmed)
    return Token(key, "word", word, capital=word in openers, weak=key in WEAK)


def _steps(words: list[str], names: set[str]) -> list[set[str]] | None:
    """The text's clauses in the order it says they happen ("X before Y", "before Y, X", "X after
    Y", "once Y, X", "X until Y"), or None when it has fewer than two."""
    clauses: list[list[str]] = [[]]
    for word in words:
        if word in (",", ";", ":", "then", "step", "next", "finally", "afterwards"):
            clauses.append([])
        else:
            clauses[-1].append(word)
    clauses = [c for c in clauses if c]
    ordered: list[list[str]] = []
    k = 0
    while k < len(clauses):
        clause = clauses[k]
        if clause[0] in ("before", "after", "once") and k + 1 < len(clauses):  # "Before merging, run…"
            first, then = (clauses[k + 1], clause[1:]) if clause[0] == "before" else (clause[1:], clauses[k + 1])
            ordered.extend([first, then])
            k += 2
            continue
        for marker in ("after", "until", "once", "before"):
            if marker in clause[1:]:
                at = clause.index(marker, 1)
                head, tail = clause[:at], clause[at + 1 :]
                ordered.extend([head, tail] if marker == "before" else [tail, head])  # "X after Y": Y first
                break
        else:
            ordered.append(clause)
        k += 1
    steps = []
    for clause in ordered:
        keys = {
            t.key
            for w in clause
            if w not in STOP and w not in ORDER_WORDS and w not in NEGATORS and w not in UPDATE
            if not w.startswith("§") and w not in (",", ";", ":", "=")
            for t in [token_of(w, names, set())]
            if not t.weak
        }
        if keys:
            steps.append(keys)
    return steps if len(steps) >= 2 else None


# ---------------------------------------------------------------- the reading budget (issue 33)
#
# A fact may be 16,000 characters long, and an agent may write as many as it likes on one topic:
# reading must cost a bounded amount of CPU whatever the text. Every reader (here and in
# memory.classifier.quantities) is linear in its input (tests/memory/test_classifier_hostile.py
# times them on bench/hostile_text.py's worst cases); on top of that:
# - a text is read in a window: its first READ_CHARS characters (cut at a space). Longer texts
#   are compared on that window only, so the comparison can find a difference there but never
#   vouch for the rest: a SAME or CONTRADICTS read in the windows becomes UNSURE (a person
#   decides), and the pair model (which reads less still) is not asked;
# - comparing two readings spends steps (the aligning, substitution and order loops, which grow
#   with the product of the two texts' lengths): past COMPARE_STEPS the pair is "too long to
#   compare word by word" — UNSURE when the embeddings are close, else SEPARATE;
# - a proposal is compared with its NEAREST_FACTS closest live facts of the topic (by cosine),
#   nearest first, reading at most PROPOSAL_CHARS of their windows and sharing PROPOSAL_STEPS;
#   the others are SEPARATE, not read (`classify_many(nearest=…)`). So a topic of many long facts
#   costs a proposal what reading 20 windows costs, however many it holds.
# The labelled pairs (≤ 186 characters) and the distinct-sentence streams of `make eval-writes`
# never come near these bounds: their largest comparison spends a few hundred steps.

READ_CHARS = 2_000
COMPARE_STEPS = 20_000
NEAREST_FACTS = 50
PROPOSAL_CHARS = 40_000
PROPOSAL_STEPS = 100_000


class TooLong(Exception):
    """A comparison spent its budget."""


class Budget:
    """Steps left for comparing; `spend` raises TooLong past zero."""

    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise TooLong


def window(text: str) -> str:
    """What of `text` is read: all of it up to READ_CHARS characters, else its first READ_CHARS
    cut at the last whitespace (or mid-word when there is none in the second half)."""
    if len(text) <= READ_CHARS:
        return text
    head = text[: READ_CHARS + 1]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut >= READ_CHARS // 2 else head[:READ_CHARS]


def read_whole(text: str) -> bool:
    return len(text) <= READ_CHARS


def announces_update(text: str) -> bool:
    """Whether a text says it revises an earlier claim: "now", "instead", "no longer", "switched",
    "moved", "replaced" (vocabulary UPDATE)."""
    return read(window(text)).update


def forget_readings() -> None:
    """Forget every text read (`read` keeps the last 4,096): after an erasure, or to time a cold read."""
    read.cache_clear()
