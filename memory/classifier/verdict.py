"""Comparing two readings and the verdict (issue 14): restates, contradicts, separate — or unsure.

The two errors that cost are lopsided: a false SAME silently merges away a contradiction, a
false CONTRADICTS supersedes a true fact; UNSURE costs a reviewer one click, SEPARATE between
two versions of a fact leaves both live. So the classifier asks for strong evidence before
either of the first two and says UNSURE (or SEPARATE, when the texts are far apart) otherwise.

A fact is read as a sequence of *content tokens* (memory.classifier.reading: stop words dropped,
abbreviations and synonyms folded, words stemmed, typos forgiven) plus what is read apart:
quantities in canonical units ("60 s" = "one minute", "twice a day" = "every 12 hours"), polarity
(the parity of negations and negative words: "not disabled" = "enabled"), bounds (at least / at
most), hedges (may, sometimes, partly), the order of steps, and "x over y" preferences. The texts
are aligned; what only one of them says is the difference, and the verdict reads it:
  SAME         nothing replaced, negated, reordered or hedged; the new text keeps every content
               word of the old (it may add plain words, never a value, never in its subject);
               and the embeddings agree;
  CONTRADICTS  exactly one clean change and everything else aligned: a quantity that differs
               in canonical units, a value (name, identifier, tool, environment, day) replaced
               by one of its type in the same slot, a polarity or bound flip, steps both texts
               order explicitly in another order, or a list that gains or loses items;
  SEPARATE     the change is in the subject ("Bug #1201" / "Bug #1202"), several places differ,
               the new text adds a claim ("also"), or the texts are far apart;
  UNSURE       everything else: rewordings that are not clean, replaced plain words (a synonym
               or an alternative?), partial updates, orders only implied.
The full-text cosine (already computed by the write path) is the only embedding used.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import StrEnum

from memory.classifier.quantities import Qty
from memory.classifier.reading import (
    COMPARE_STEPS,
    ID_SEPARATORS,
    READ_CHARS,
    TYPED,
    Budget,
    Reading,
    Token,
    TooLong,
    normalise,
    read,
    read_whole,
    token_of,
    typed,
    window,
)
from memory.classifier.vocabulary import ATTITUDES, NEGATORS, POLAR, QUALIFIERS


class Relation(StrEnum):
    """What a proposal is to a live fact on its topic: SAME restates it (a re-mention, merged),
    CONTRADICTS replaces it (one supersedes the other), SEPARATE says something else (both stay
    live), UNSURE cannot be told from the wording (both stay live and a person is asked)."""

    SAME = "same"
    CONTRADICTS = "contradicts"
    SEPARATE = "separate"
    UNSURE = "unsure"


@dataclass(frozen=True)
class Verdict:
    """A relation and why, in words a reviewer reads ("contradicts: `tabs` replaces `spaces`")."""

    kind: Relation
    reason: str


# ---------------------------------------------------------------- aligning two readings


def close_spelling(a: str, b: str) -> bool:
    """One typo apart (insertion, deletion, substitution or transposition) in a long word."""
    if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 5 or max(len(a), len(b)) < 6 or a[0] != b[0]:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if len(long) != len(short) + 1:
        return False
    # one deletion makes them equal iff deleting the first letter where they part does (linear:
    # trying every deletion copied the word once per letter)
    at = _common_prefix(short, long)
    return long[at + 1 :] == short[at:]


def _common_prefix(x: str, y: str) -> int:
    n = 0
    for p, q in zip(x, y, strict=False):
        if p != q:
            break
        n += 1
    return n


def _same_lemma(a: str, b: str) -> bool:
    """Derivations of one word ("allergic" / "allergy", "encrypt" / "encryption")."""
    if not (a.isalpha() and b.isalpha()):
        return False
    n = _common_prefix(a, b)
    return n >= 6 and (max(len(a), len(b)) <= n + 3 or (n == min(len(a), len(b)) and max(len(a), len(b)) <= n + 5))


@dataclass
class _Diff:
    only_a: list[int]  # indices into a.tokens of what b does not say
    only_b: list[int]
    agreeing: list[tuple[Qty, Qty]]  # quantities written differently that agree ("60 s" = "1 min")


def _align(a: Reading, b: Reading, budget: Budget) -> _Diff:
    """What each text says that the other does not (weak words aside)."""
    keys_a = {t.key for t in a.tokens if t.qty is None}
    keys_b = {t.key for t in b.tokens if t.qty is None}
    only_a = {i for i, t in enumerate(a.tokens) if not t.weak and (t.qty is not None or t.key not in keys_b)}
    only_b = {j for j, t in enumerate(b.tokens) if not t.weak and (t.qty is not None or t.key not in keys_a)}
    agreeing: list[tuple[Qty, Qty]] = []
    for i in sorted(only_a):
        x = a.tokens[i]
        budget.spend(len(only_b))
        for j in sorted(only_b):
            y = b.tokens[j]
            if x.qty and y.qty and x.qty.agrees(y.qty):
                if x.qty.surface.replace(" ", "") != y.qty.surface.replace(" ", ""):
                    agreeing.append((x.qty, y.qty))
            elif x.qty or y.qty or not (close_spelling(x.key, y.key) or _same_lemma(x.key, y.key)):
                continue
            only_a.discard(i)
            only_b.discard(j)
            break
    # a quantity agreeing with one already matched on the other side (a range, a repeat)
    quantities_a = [t.qty for t in a.tokens if t.qty]
    quantities_b = [t.qty for t in b.tokens if t.qty]
    budget.spend(len(quantities_a) * len(quantities_b))
    only_a -= {i for i in only_a if (q := a.tokens[i].qty) and any(q.agrees(o) for o in quantities_b)}
    only_b -= {j for j in only_b if (q := b.tokens[j].qty) and any(q.agrees(o) for o in quantities_a)}
    # compounds ("standup" / "stand up") and the parts of an identifier the other text spells out
    shared_ids = {t.key for t in a.tokens if t.kind == "id"} & {t.key for t in b.tokens if t.kind == "id"}
    shared_parts = {p for key in shared_ids for p in ID_SEPARATORS.split(key) if p}
    for mine, theirs, free in ((a, b, only_a), (b, a, only_b)):
        parts = theirs.id_parts | shared_parts
        joined = {x.surface + y.surface for x, y in itertools.pairwise(theirs.tokens)}
        keys = {x.key for x in theirs.tokens}
        for i in sorted(free):
            t = mine.tokens[i]
            spelled = t.surface.replace("-", "") in joined or t.key in parts or t.surface in parts
            if (t.qty is None and spelled) or (t.kind == "id" and _spelled_out(t, keys)):
                free.discard(i)
    # an acronym and the words it abbreviates ("NYC" / "New York City", "IC" / "incident commander")
    for mine, theirs, free, other in ((a, b, only_a, only_b), (b, a, only_b, only_a)):
        initials = "".join(x.surface[:1] for x in theirs.tokens)
        for i in sorted(free):
            budget.spend(1)
            run = _spelled_acronym(mine.tokens[i], initials)
            if run:
                free.discard(i)
                other.difference_update(run)
    return _Diff(sorted(only_a), sorted(only_b), agreeing)


def _spelled_out(t: Token, keys: set[str]) -> bool:
    """An identifier whose every part the other text (its token `keys`) says in words
    (`@priya.natarajan` / "Priya Natarajan", `billing-svc` / "the billing service")."""
    parts = [p for p in ID_SEPARATORS.split(t.key) if p]
    return len(parts) >= 2 and all(p.isalpha() and token_of(p, set(), set()).key in keys for p in parts)


def _spelled_acronym(t: Token, initials: str) -> list[int]:
    """The tokens of the other text (the first letters of its tokens: `initials`) that spell the
    acronym `t`, if any."""
    letters = t.surface
    if not (t.acronym and letters.isalpha() and 2 <= len(letters) <= 5):
        return []
    at = initials.find(letters)
    return list(range(at, at + len(letters))) if at >= 0 else []


def _order(a: Reading, b: Reading, budget: Budget) -> str:
    """How the texts order the steps they share: "" when they agree or state no order,
    "explicit" when both state one (then, first, 1) 2), before, after…) and some steps run the
    other way round, "implicit" when the steps run the other way round in a plain list."""
    if a.steps is None or b.steps is None:
        return ""
    keys_a, keys_b = set().union(*a.steps), set().union(*b.steps)
    if len(keys_a & keys_b) / len(keys_a | keys_b) < 0.6:
        return ""
    pos_a, pos_b = _step_positions(a.steps), _step_positions(b.steps)
    keys = sorted(pos_a.keys() & pos_b.keys())
    budget.spend(len(keys) * (len(keys) - 1) // 2)
    discordant = any(
        (pos_a[x] - pos_a[y]) * (pos_b[x] - pos_b[y]) < 0 for k, x in enumerate(keys) for y in keys[k + 1 :]
    )
    if not discordant:
        return ""
    if a.explicit and b.explicit:
        return "explicit"
    # A list without order words may be a set ("hiking, cooking and chess") or a sequence ("tag
    # the commit, build the image"); only steps of several words, or an order the other text
    # states, make it a sequence.
    if a.explicit or b.explicit or all(len(s) >= 2 for s in a.steps + b.steps):
        return "implicit"
    return ""


def _step_positions(steps: list[set[str]]) -> dict[str, int]:
    """The step each word belongs to, for the words that belong to one step only."""
    seen: dict[str, list[int]] = {}
    for index, step in enumerate(steps):
        for key in step:
            seen.setdefault(key, []).append(index)
    return {key: at[0] for key, at in seen.items() if len(at) == 1}


# ---------------------------------------------------------------- comparing two readings


def _valueish(t: Token) -> bool:
    """A value, or a capitalised word opening a sentence that may be a name ("Dana is on call")."""
    return t.kind in TYPED or t.capital


def _same_kind(x: Token, y: Token) -> bool:
    """Tokens one could stand in for the other: numbers of one dimension (counting the same thing),
    names and identifiers, environments, days; a capitalised opener may be a name ("Dana")."""
    if x.qty and y.qty:
        return x.qty.compatible(y.qty)
    if x.qty or y.qty:
        return False
    kinds = {"name" if t.capital else t.kind for t in (x, y)}
    return len(kinds) == 1 or kinds <= {"name", "id"}


def _strong_sides(r: Reading) -> tuple[list[int], list[int]]:
    """For each token, the index of the nearest strong (not weak) token before it (-1: none) and
    after it (len(r.tokens): none), found once instead of walking past weak words at every look."""
    n = len(r.tokens)
    before, after = [-1] * n, [n] * n
    last = -1
    for k in range(n):
        before[k] = last
        if not r.tokens[k].weak:
            last = k
    last = n
    for k in range(n - 1, -1, -1):
        after[k] = last
        if not r.tokens[k].weak:
            last = k
    return before, after


def _neighbours(
    r: Reading, index: int, changed: set[int], paired: dict[int, int], sides: tuple[list[int], list[int]]
) -> tuple[str, str]:
    """What sits right before and after `index` among the strong tokens (`sides`: _strong_sides):
    an unchanged token's key, a replaced token's pair number, or "" (a changed token or the text's
    end)."""
    found = []
    for k in (sides[0][index], sides[1][index]):
        if not 0 <= k < len(r.tokens):
            found.append("")
        elif k in paired:
            found.append(f"#{paired[k]}")
        else:
            found.append("" if k in changed else r.tokens[k].key)
    return found[0], found[1]


def _substitutions(a: Reading, b: Reading, diff: _Diff, budget: Budget) -> list[tuple[int, int]]:
    """Pairs (i, j): a.tokens[i] replaced by b.tokens[j], a value of the same type in the same
    slot — the one value of its type each text changed, or one beside an unchanged token (or
    beside another replaced pair: `db-2 in us-east-1b` / `db-3 in us-east-1c`)."""
    changed_a, changed_b = set(diff.only_a), set(diff.only_b)
    typed_a = [i for i in diff.only_a if _valueish(a.tokens[i])]
    typed_b = [j for j in diff.only_b if _valueish(b.tokens[j])]
    subs: list[tuple[int, int]] = []
    for i in list(typed_a):
        budget.spend(len(typed_a) + len(typed_b))
        mates_a = [k for k in typed_a if _same_kind(a.tokens[k], a.tokens[i])]
        mates_b = [j for j in typed_b if _same_kind(b.tokens[j], a.tokens[i])]
        if len(mates_a) == len(mates_b) == 1:
            subs.append((i, mates_b[0]))
            typed_a.remove(i)
            typed_b.remove(mates_b[0])
    sides_a, sides_b = _strong_sides(a), _strong_sides(b)
    found = True
    while found:
        found = False
        paired_a = {i: n for n, (i, _) in enumerate(subs)}
        paired_b = {j: n for n, (_, j) in enumerate(subs)}
        for i in typed_a:
            budget.spend(len(typed_b) + 1)
            la, ra = _neighbours(a, i, changed_a, paired_a, sides_a)
            for j in typed_b:
                lb, rb = _neighbours(b, j, changed_b, paired_b, sides_b)
                if _same_kind(a.tokens[i], b.tokens[j]) and (la == lb != "" or ra == rb != ""):
                    subs.append((i, j))
                    typed_a.remove(i)
                    typed_b.remove(j)
                    found = True
                    break
            if found:
                break
    return subs


def _one_slot(a: Reading, b: Reading, subs: list[tuple[int, int]]) -> bool:
    """Replaced values side by side in both texts and alike (`db-2 in us-east-1b` / `db-3 in
    us-east-1c`, `02:00-04:00` / `01:00-05:00`): one change, spelled in several tokens."""
    ia, jb = sorted(i for i, _ in subs), sorted(j for _, j in subs)
    adjacent = all(y - x == 1 for x, y in itertools.pairwise(ia)) and all(y - x == 1 for x, y in itertools.pairwise(jb))
    alike = all(
        _common_prefix(a.tokens[i].key, b.tokens[j].key) >= 3
        if a.tokens[i].qty is None
        else _same_kind(a.tokens[i], b.tokens[j])
        for i, j in subs
    )
    return adjacent and alike


def _at_subject(r: Reading, index: int) -> bool:
    """The token names what the claim is about: it comes before the text's first verb `is` /
    `was` / `has`… ("Bug #1201 is fixed in v2.4.1", "The payments service timeout is 10 s"), or
    is its first strong token when it has no such verb ("Priya owns the billing service")."""
    strong = [i for i, t in enumerate(r.tokens) if not t.weak]
    if r.tokens[index].at > r.verb_at:
        return False
    return r.verb_at < 10**6 or index == strong[0]


def _polar_axes(r: Reading) -> set[str]:
    return {POLAR[w][0] if w in POLAR else "on" for w in r.polar if w not in NEGATORS}


def _negative(word: str) -> bool:
    return word in NEGATORS or word == "off" or (word in POLAR and POLAR[word][1] < 0)


def _polarity_alike(a: Reading, b: Reading) -> bool:
    """Equal parity is not enough to call two texts the same: "not disabled" = "enabled" and
    "no deploys" = "deploys are prohibited", but "shared" ≠ "private cache; nothing is shared"."""
    axes_a, axes_b = _polar_axes(a), _polar_axes(b)
    if axes_a == axes_b:
        return True
    if not (any(map(_negative, a.polar)) or any(map(_negative, b.polar))):
        # "backups run daily" / "… and are encrypted": one asserts a state the other does not; a
        # liking, a permission or a need ("enjoys", "allows", "needs") is mere wording
        return not (axes_a ^ axes_b) - ATTITUDES
    if not a.polar or not b.polar:
        return False
    return bool(axes_a & axes_b) or not axes_a or not axes_b


@dataclass
class _Comparison:
    """What differs between two readings, sorted by what it can mean."""

    subs: list[tuple[Token, Token]]  # a value replaced by another of its type, in its slot
    rest_a: list[Token]  # what only the old text says (not replaced)
    rest_b: list[Token]  # what only the new text says
    flipped: bool  # one text affirms what the other denies
    bound_flip: bool  # an upper bound where the other states a lower one
    order: str  # "", "explicit", "implicit" (see _order) or "reversed" ("x over y" / "y over x")
    modal: bool  # only one text hedges (may, can, sometimes, partly, except…)
    alike: bool  # the polar words of both texts are about the same things
    agreeing: list[tuple[Qty, Qty]]  # quantities written differently that agree
    subject: bool  # the one value replaced names what both texts are about (see _at_subject)
    beside_name: bool  # the one value replaced stands next to an unchanged name ("Bob Nguyen")
    narrowing: list[Token]  # words the new text adds that may narrow what it is about
    slots: int  # how many places of the texts changed

    @property
    def changes(self) -> list[str]:
        """The clean changes a contradiction is made of, in words."""
        found = [f"`{y.surface}` replaces `{x.surface}`" for x, y in self.subs]
        if self.flipped:
            found.append("one text denies what the other affirms")
        if self.bound_flip:
            found.append("an upper bound where the other has a lower one")
        if self.order == "reversed":
            found.append("the same values the other way round")
        elif self.order:
            found.append("the same steps in another order")
        return found


def _beside_name(r: Reading, index: int, changed: set[int]) -> bool:
    return any(
        0 <= k < len(r.tokens) and k not in changed and r.tokens[k].kind == "name" and not r.tokens[k].acronym
        for k in (index - 1, index + 1)
    )


def _narrows(r: Reading, index: int) -> bool:
    """An added word that may narrow the claim: it stands before the text's first verb `is` /
    `are`… ("the *admin* API rate limit is…") or opens a qualifier ("uses Redis *for* sessions")."""
    t = r.tokens[index]
    if t.weak or t.qty is not None:
        return False
    return t.at < r.verb_at < 10**6 or (t.at > 0 and r.words[t.at - 1] in QUALIFIERS)


def _ordinal(r: Reading, t: Token) -> bool:
    return r.explicit and r.steps is not None and t.key in ("first", "second", "third", "last", "step")


def _reversed(a: Reading, b: Reading) -> bool:
    """The same two values the other way round: "email over Slack" / "Slack over email", "from
    Postgres to MySQL" / "from MySQL to Postgres"."""
    swapped = {(y, x) for x, y in a.preferred} | {(x, _OTHER_WAY[y]) for x, y in a.preferred if y in _OTHER_WAY}
    return bool(swapped & (b.preferred - a.preferred))


_OTHER_WAY = {"→": "←", "←": "→"}


def _compare(a: Reading, b: Reading, budget: Budget) -> _Comparison:
    diff = _align(a, b, budget)
    pairs = _substitutions(a, b, diff, budget)
    replaced_a, replaced_b = {i for i, _ in pairs}, {j for _, j in pairs}
    # "first" / "second" in a text that states an order only mark its steps
    rest_a = [a.tokens[i] for i in diff.only_a if i not in replaced_a and not _ordinal(a, a.tokens[i])]
    rest_b = [b.tokens[j] for j in diff.only_b if j not in replaced_b and not _ordinal(b, b.tokens[j])]
    one_slot = len(pairs) >= 2 and _one_slot(a, b, pairs)
    subject = len(pairs) == 1 and _at_subject(a, pairs[0][0]) and _at_subject(b, pairs[0][1])
    flipped = a.sign != b.sign
    bound_flip = bool(a.bounds and b.bounds and not a.bounds & b.bounds)
    order = "reversed" if _reversed(a, b) else _order(a, b, budget)
    typed_rest = any(map(typed, rest_a)) or any(map(typed, rest_b))
    slots = (1 if one_slot else len(pairs)) + flipped + bound_flip + bool(order) + typed_rest
    return _Comparison(
        subs=[(a.tokens[i], b.tokens[j]) for i, j in pairs],
        rest_a=rest_a,
        rest_b=rest_b,
        flipped=flipped,
        bound_flip=bound_flip,
        order=order,
        modal=a.possible != b.possible,
        alike=_polarity_alike(a, b),
        agreeing=diff.agreeing,
        subject=subject and a.tokens[pairs[0][0]].qty is None,
        beside_name=len(pairs) == 1 and _beside_name(a, pairs[0][0], set(diff.only_a)),
        narrowing=[b.tokens[j] for j in diff.only_b if _narrows(b, j)],
        slots=slots,
    )


def _show(tokens: list[Token], limit: int = 3) -> str:
    return " ".join(f"`{t.surface}`" for t in tokens[:limit])


# ---------------------------------------------------------------- the verdict

# A restatement that adds words the other does not say (and drops none) must embed at least
# this close; one that only rewords (every content word aligned) at least SAME_FLOOR.
SAME_COSINE = 0.80
SAME_FLOOR = 0.50
# Below this cosine, texts that differ beyond one clean change are separate facts; above it a
# person is asked (UNSURE).
SEPARATE_COSINE = 0.72
# Below this cosine (of the contents alone) two statements are separate without reading them: the
# write path reads only the live facts of a domain at least this close (memory.services.nearby),
# and the pair model reads the rules' SEPARATE pairs down to it (round 6, issue 34).
RELATED_COSINE = 0.5


def classify(old: str, new: str, similarity: float) -> Verdict:
    """Whether `new` restates, contradicts or is separate from `old` (a live fact on the same
    domain and topic), given the cosine of their embeddings; UNSURE when the wording cannot
    tell — both facts then stay live and a person decides. Pure, about 1 ms a pair (less when
    a text was read before); bounded whatever the texts (see READ_CHARS, COMPARE_STEPS)."""
    return classify_bounded(old, new, similarity, Budget(COMPARE_STEPS))[0]


def classify_bounded(old: str, new: str, similarity: float, budget: Budget) -> tuple[Verdict, bool]:
    """`classify`, spending `budget`; and whether both texts were read whole and compared in full
    (only then may the pair model revise the verdict)."""
    if normalise(old) == normalise(new):
        return Verdict(Relation.SAME, "same meaning: identical text"), True
    a, b = read(window(old)), read(window(new))
    try:
        c = _compare(a, b, budget)
    except TooLong:
        return _too_long(a, b, similarity), False
    verdict = _verdict(a, b, c, similarity)
    if read_whole(old) and read_whole(new):
        return verdict, True
    if verdict.kind in (Relation.SAME, Relation.CONTRADICTS):
        detail = verdict.reason.split(": ", 1)[-1]
        verdict = Verdict(
            Relation.UNSURE, f"unsure: {detail}, in the first {READ_CHARS:,} characters (the rest was not read)"
        )
    return verdict, False


def _verdict(a: Reading, b: Reading, c: _Comparison, similarity: float) -> Verdict:
    changes = c.changes
    if not changes:
        return _restated(a, b, c, similarity)
    if c.rest_a or c.rest_b or (len(changes) > 1 and c.slots > 1):
        return _undecided(c, similarity, changes[0])
    return _contradicted(a, b, c, changes[0], similarity)


def _too_long(a: Reading, b: Reading, similarity: float) -> Verdict:
    """The verdict of a pair whose comparison spent its budget: no machine decides it."""
    detail = f"too long to compare word by word ({len(a.tokens):,} and {len(b.tokens):,} words read)"
    if similarity < SEPARATE_COSINE:
        return Verdict(Relation.SEPARATE, f"separate: different claims ({detail})")
    return Verdict(Relation.UNSURE, f"unsure: {detail}")


def _restated(a: Reading, b: Reading, c: _Comparison, similarity: float) -> Verdict:
    """Nothing replaced, negated or reordered: SAME only if the new text keeps every content word
    of the old (it may add plain words, never a value) and the embeddings agree."""
    if b.additive and c.rest_b:
        return Verdict(Relation.SEPARATE, f"separate: adds a further claim ({_show(c.rest_b)})")
    one_side = c.rest_b if not c.rest_a else c.rest_a if not c.rest_b else []
    if (
        one_side
        and all(t.listed for t in one_side)
        and c.alike
        and not c.modal
        and (all(map(typed, one_side)) or (b.only and not c.rest_b))
    ):
        # "cut on Mondays and Wednesdays" / "on Mondays, Wednesdays and Fridays", "accepts API
        # keys and OAuth tokens" / "accepts OAuth tokens only": the same list, changed
        verb = "adds" if c.rest_b else "drops"
        return Verdict(Relation.CONTRADICTS, f"contradicts: the list {verb} {_show(one_side)}")
    if (
        c.rest_a
        or any(map(typed, c.rest_b))
        or not c.alike
        or c.modal
        or (b.update and not a.update)
        or a.past != b.past  # "Alex lived in Lisbon" is no longer "Alex lives in Lisbon"
        or c.narrowing  # "the admin API rate limit" is not "the API rate limit"
    ):
        return _undecided(c, similarity, "")
    if c.rest_b:
        if similarity >= SAME_COSINE:
            return Verdict(Relation.SAME, f"same meaning: the same claims, with {_show(c.rest_b, 2)} added")
        return _undecided(c, similarity, "")
    if similarity < SAME_FLOOR:
        return _undecided(c, similarity, "")
    if c.agreeing:
        qa, qb = c.agreeing[0]
        return Verdict(Relation.SAME, f"same meaning: numbers agree ({qa.surface} = {qb.surface})")
    return Verdict(Relation.SAME, "same meaning: the same claims, reworded")


def _contradicted(a: Reading, b: Reading, c: _Comparison, what: str, similarity: float) -> Verdict:
    """One clean change and the rest agreeing: a contradiction, unless what changed names a
    different subject or another event, or the order of steps is only implied."""
    if c.order == "implicit" or c.modal:
        return _undecided(c, similarity, what)
    if c.subs and c.subject:
        x, y = c.subs[0]
        if b.update:
            return Verdict(Relation.CONTRADICTS, f"contradicts: {what}")
        if _looks_like_value(x) and _looks_like_value(y):
            # "Mia leads the team" / "Omar leads the team": a new lead, or a second one
            return Verdict(Relation.UNSURE, f"unsure: `{y.surface}` where the other has `{x.surface}`")
        return Verdict(Relation.SEPARATE, f"separate: about a different subject (`{x.surface}` / `{y.surface}`)")
    if len(c.subs) == 1 and _looks_like_value(c.subs[0][0]) and c.beside_name:
        # "Bob Nguyen" / "Robert Nguyen": another person, or the same one named differently
        x, y = c.subs[0]
        return Verdict(Relation.UNSURE, f"unsure: `{y.surface}` where the other has `{x.surface}`, in one full name")
    if c.subs and (a.past or b.past) and any(x.qty and x.qty.dim == "date" for x, _ in c.subs):
        return Verdict(Relation.SEPARATE, f"separate: another event ({what})")
    return Verdict(Relation.CONTRADICTS, f"contradicts: {what}")


def _looks_like_value(t: Token) -> bool:
    """A person's name ("Mia", "Omar") or a tool's ("squash", "rebase"), not an acronym."""
    return (t.kind == "name" or t.capital) and t.surface.isalpha() and not t.acronym


def _undecided(c: _Comparison, similarity: float, what: str) -> Verdict:
    """Neither a clean restatement nor a clean contradiction: separate when the texts are about
    different subjects or cases, or far apart; else a person decides."""
    detail = what or (
        f"{_show(c.rest_a, 2)} / {_show(c.rest_b, 2)}" if c.rest_a and c.rest_b else _show(c.rest_a or c.rest_b)
    )
    if c.subject:
        x, y = c.subs[0]
        return Verdict(Relation.SEPARATE, f"separate: about a different subject (`{x.surface}` / `{y.surface}`)")
    if c.slots >= 2:
        return Verdict(Relation.SEPARATE, f"separate: differs in {c.slots} places, a different case ({detail})")
    if similarity < SEPARATE_COSINE:
        return Verdict(Relation.SEPARATE, f"separate: different claims ({detail})")
    return Verdict(Relation.UNSURE, f"unsure: similar wording, different claims ({detail})")
