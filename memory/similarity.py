"""Deciding whether a proposed fact restates, contradicts or is separate from a live one.

Embedding cosine alone cannot tell "deploys happen on Tuesdays" from "… on Fridays": MiniLM
puts minimal-edit contradictions as close as paraphrases (0.85–0.98 on our labelled pairs,
tests/data/labelled_pairs.py). So a restatement must also agree on its *salient tokens* —
numbers, identifiers and proper names — while a paraphrase may reword everything else.

Two classifiers live here. `classify_pair` (cosine thresholds plus salient tokens) is the one
the write path used first. `classify` (issue 14) reads both texts — quantities in canonical
units, negation, names, the order of steps — and answers SAME, CONTRADICTS, SEPARATE or UNSURE
with a reason a reviewer can read, SAME and CONTRADICTS only on strong evidence; `make
eval-writes` measures both on labelled pairs.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum

from django.conf import settings

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/+#-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_NEGATIONS = {"not", "never", "no", "cannot", "can't", "don't", "doesn't", "isn't", "aren't", "won't", "without"}
# Words whose swap flips a statement although the sentence embeds almost identically.
_NUMBER_WORDS = {
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "once",
    "twice",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "quarterly",
    "annually",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "half",
    "double",
    "single",
    "first",
    "last",
}
_POLAR_WORDS = {
    "small",
    "large",
    "big",
    "tiny",
    "huge",
    "before",
    "after",
    "enabled",
    "disabled",
    "allowed",
    "forbidden",
    "mutable",
    "immutable",
    "always",
    "sometimes",
    "true",
    "false",
    "on",
    "off",
    "min",
    "max",
    "minimum",
    "maximum",
    "increase",
    "decrease",
    "sync",
    "async",
    "synchronous",
    "asynchronous",
    "public",
    "private",
    "optional",
    "local",
    "remote",
    "internal",
    "external",
    "early",
    "late",
    "more",
    "less",
    "fewer",
    "higher",
    "lower",
    "faster",
    "slower",
    "new",
    "old",
    "legacy",
    "deprecated",
    "blocking",
}


class PairKind(StrEnum):
    SAME = "same"
    CONFLICT = "conflict"
    UNRELATED = "unrelated"


def normalise(text: str) -> str:
    """Lower-cased, whitespace-collapsed, without trailing punctuation: equal means restated."""
    return " ".join(text.lower().split()).rstrip(".!;, ")


def _singular(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def _words(text: str) -> set[str]:
    """Every word, lower-cased and singular, with identifiers also split into their parts."""
    words: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        words.add(_singular(word))
        words.update(_singular(part) for part in re.split(r"[-_./:]", word) if part)
    return words


def salient_tokens(text: str) -> set[str]:
    """Numbers, identifiers (with digits or `-_./:`), capitalised names, number words and
    polar words: what must agree for two texts to say the same thing."""
    tokens: set[str] = set()
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        for index, match in enumerate(_WORD.finditer(sentence)):
            word = match.group(0)
            lower = _singular(word.lower())
            if (
                any(c.isdigit() for c in word)
                or any(c in word for c in "-_./:+#")
                or (word[0].isupper() and index > 0)  # a capital opening a sentence says nothing
                or lower in _NUMBER_WORDS
                or lower in _POLAR_WORDS
            ):
                tokens.add(lower)
    return tokens


def _missing(tokens: set[str], words: set[str]) -> set[str]:
    return {t for t in tokens if t not in words and not all(p in words for p in re.split(r"[-_./:]", t) if p)}


def contrasting(a: str, b: str) -> bool:
    """True when one text names a number, identifier, name or polar word the other lacks,
    or only one of them is negated."""
    words_a, words_b = _words(a), _words(b)
    if _missing(salient_tokens(a), words_b) or _missing(salient_tokens(b), words_a):
        return True
    return negated(a) != negated(b)


def negated(text: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z']+", text)}
    return bool(words & _NEGATIONS) or "n't" in text.lower()


def classify_pair(
    similarity: float, a: str, b: str, *, duplicate: float | None = None, contradiction: float | None = None
) -> PairKind:
    """Classify two same-topic texts given their embedding cosine."""
    duplicate = settings.ENGRAM_DUPLICATE_THRESHOLD if duplicate is None else duplicate
    contradiction = settings.ENGRAM_CONTRADICTION_THRESHOLD if contradiction is None else contradiction
    if normalise(a) == normalise(b):
        return PairKind.SAME
    if similarity >= duplicate and not contrasting(a, b):
        return PairKind.SAME
    if similarity >= contradiction:
        return PairKind.CONFLICT
    return PairKind.UNRELATED


# ---------------------------------------------------------------------------------------------
# The write classifier (issue 14): restates, contradicts, separate — or unsure.
#
# The two errors that cost are lopsided: a false SAME silently merges away a contradiction, a
# false CONTRADICTS supersedes a true fact; UNSURE costs a reviewer one click, SEPARATE between
# two versions of a fact leaves both live. So the classifier asks for strong evidence before
# either of the first two and says UNSURE (or SEPARATE, when the texts are far apart) otherwise.
#
# A fact is read as a sequence of *content tokens* (stop words dropped, abbreviations and
# synonyms folded, words stemmed, typos forgiven) plus what is read apart: quantities in
# canonical units ("60 s" = "one minute", "twice a day" = "every 12 hours"), polarity (the parity
# of negations and negative words: "not disabled" = "enabled"), bounds (at least / at most),
# hedges (may, sometimes, partly), the order of steps, and "x over y" preferences. The texts are
# aligned; what only one of them says is the difference, and the verdict reads it:
#   SAME         nothing replaced, negated, reordered or hedged; the new text keeps every content
#                word of the old (it may add plain words, never a value, never in its subject);
#                and the embeddings agree;
#   CONTRADICTS  exactly one clean change and everything else aligned: a quantity that differs
#                in canonical units, a value (name, identifier, tool, environment, day) replaced
#                by one of its type in the same slot, a polarity or bound flip, steps both texts
#                order explicitly in another order, or a list that gains or loses items;
#   SEPARATE     the change is in the subject ("Bug #1201" / "Bug #1202"), several places differ,
#                the new text adds a claim ("also"), or the texts are far apart;
#   UNSURE       everything else: rewordings that are not clean, replaced plain words (a synonym
#                or an alternative?), partial updates, orders only implied.
# The full-text cosine (already computed by the write path) is the only embedding used.
# ---------------------------------------------------------------------------------------------


def _wordlist(text: str) -> frozenset[str]:
    return frozenset(text.split())


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


_STOP = _wordlist(
    """a an the this that these those it its it's is are was were be been being am do does did done
    doing has have had having will would shall should can could may might must to of in on at by for
    from with into onto via through per as and or but if so than then also too there here which who
    whom whose what when where while we our us you your they their them he she his her i me my mine
    one's all any each every always such own same again because since other just very really currently
    actually please about around approximately approx roughly e.g eg i.e ie etc let lets let's get gets got getting
    set up out over off's way thing things done make sure ever still yet already agreed note one during
    between among across"""
)
# Words that carry almost no claim of their own: a paraphrase adds or drops them freely.
_WEAK = _wordlist(
    """use us used using uses utilize utilizes utilized live lives living lived located locate sit
    sits happen happens happened take takes taken took place held hold holds handle handled handles go
    goes going went gone come comes came keep keeps kept stay stays stayed remain
    remains remained make makes made making called named user users user's team teams our we per
    basis whole fully totally entire entirely both typically usually generally normally default
    configured configure setting settings value values support supported file files mode tool tools
    service services system systems thing things host hosted hosts hosting run runs running ran execute
    executes executed serve serves served serving apache amazon aws google hashicorp microsoft
    format formats flag flags environment environments env envs field fields option options parameter
    parameters layout codebase spec specification version versions port ports data info information
    size length duration amount number count total period interval frequency time times long"""
)
# The word "also" (and friends) announces a further fact, not a correction.
_ADDITIVE = frozenset({"also", "too", "additionally", "another", "besides", "separately", "well"})
# Words announcing that the new text revises the old one.
_UPDATE = frozenset(
    {
        "now",
        "instead",
        "only",
        "sole",
        "solely",
        "anymore",
        "longer",
        "moved",
        "switched",
        "replaced",
        "changed",
        "migrated",
        "dropped",
        "removed",
        "deprecated",
        "discontinued",
        "retired",
        "formerly",
        "previously",
    }
)
_NEGATORS = frozenset(
    {
        "not",
        "no",
        "never",
        "without",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "avoid",
        "skip",
        "unless",
    }
)
# Negative and positive poles of the same predicate: their parity is what a text asserts.
_POLAR: dict[str, tuple[str, int]] = {}
for _axis, _plus, _minus in (
    ("on", "enable enabled enables enabling activated true", "disable disabled disables deactivated false"),
    (
        "allow",
        "allow allowed allows permit permitted permits fine ok okay",
        "forbid forbidden forbids prohibit prohibited prohibits ban banned disallow disallowed deny denied",
    ),
    ("include", "include included includes including", "exclude excluded excludes excluding omit omitted"),
    ("public", "public publicly", "private privately"),
    ("sync", "sync synchronous synchronously", "async asynchronous asynchronously"),
    ("mutable", "mutable mutate mutated mutates editable", "immutable readonly read-only"),
    ("required", "required require requires need needs needed mandatory necessary compulsory", "optional"),
    (
        "like",
        "like likes liked love loves enjoy enjoys prefer prefers preferred pref prefs preference",
        "dislike dislikes disliked hate hates",
    ),
    ("increase", "increase increased increases raise raised", "decrease decreased decreases lowered reduce reduced"),
    ("remote", "remote remotely", "office onsite on-site in-person"),
    ("automatic", "automatic automatically auto", "manual manually"),
    ("open", "open opened", "closed shut"),
    ("online", "online", "offline"),
    ("available", "available", "unavailable"),
    ("visible", "visible", "hidden invisible"),
    ("encrypted", "encrypted", "unencrypted"),
    ("valid", "valid", "invalid"),
    ("secure", "secure safe", "insecure unsafe"),
    ("blocking", "blocking", "non-blocking nonblocking"),
    ("accept", "accept accepts accepted", "reject rejects rejected refuse refuses refused"),
):
    _POLAR.update({w: (_axis, 1) for w in _plus.split()})
    _POLAR.update({w: (_axis, -1) for w in _minus.split()})
_ATTITUDES = frozenset({"like", "allow", "required", "include", "accept"})
# Upper and lower bounds agree with each other only, never with a flip of polarity.
_BOUND = {
    "min": 1, "minimum": 1, "least": 1, "above": 1, "over": 1, "exceed": 1, "exceeds": 1, "more": 1,
    "greater": 1, "max": -1, "maximum": -1, "most": -1, "under": -1, "below": -1, "less": -1,
    "fewer": -1, "within": -1, "limit": -1, "limited": -1, "cap": -1, "capped": -1, "upto": -1,
}  # fmt: skip
_ORDER_WORDS = frozenset(
    {
        "then",
        "first",
        "second",
        "third",
        "finally",
        "next",
        "after",
        "before",
        "until",
        "once",
        "afterwards",
        "last",
        "later",
        "earlier",
        "followed",
        "step",
        "steps",
    }
)

# Abbreviations, spellings and synonyms, folded to one key. Multi-word phrases first.
_PHRASES: dict[tuple[str, ...], str] = {}
for _key, _variants in {
    "pr": "pull request|pull requests|merge request|merge requests|prs",
    "gha": "github actions",
    "ci": "continuous integration",
    "cd": "continuous deployment|continuous delivery",
    "s3": "simple storage service|amazon s3|aws s3",
    "ses": "simple email service|amazon ses|aws ses",
    "jit": "just in time|just-in-time",
    "eod": "end of day|end of the day",
    "ooo": "out of office|out of the office",
    "faq": "frequently asked questions|frequently asked question",
    "iac": "infrastructure as code",
    "mq": "message queue|message queues",
    "cli": "command line tool|command-line tool|command line|command-line",
    "envvar": "environment variable|environment variables|env var|env vars|env variable",
    "timeout": "time out|times out|timed out|timing out|time-out",
    "oncall": "on call|on-call",
    "disabled": "turn off|turned off|turns off|switch off|switched off|shut down|shuts down|shut off|turned-off",
    "backoff": "back off|backs off|backing off|backed off",
    "enabled": "turn on|turned on|turns on|switch on|switched on",
    "ship": "go out|goes out|went out|roll out|rolls out|rolled out",
    "manual": "by hand",
    "least": "at least",
    "most": "at most|up to|as many as",
    "approve": "sign off|signs off|sign-off|signoff|signed off|approval",
    "before": "earlier than|prior to|ahead of",
    "after": "later than",
    "hq": "headquarters|headquartered|head office",
    "plaintext": "plain text|plain-text",
    "k8s": "kubernetes",
    "bluegreen": "blue green|blue-green|blue/green",
    "eks": "elastic kubernetes service",
    "ecr": "elastic container registry",
    "rds": "relational database service",
    "tls": "transport layer security",
    "sso": "single sign-on|single sign on",
    "mfa": "multi-factor authentication|two-factor authentication|2fa",
    "wip": "work in progress",
    "tbd": "to be decided|to be determined",
    "asap": "as soon as possible",
    "db": "datastore|data store|database server",
    "cron": "cron job|cronjob|scheduled job",
    "rollback": "roll back|rolls back|rolled back",
    "outdated": "out of date|out-of-date",
    "failover": "fail over|fails over|failed over",
}.items():
    for _v in _variants.split("|"):
        _PHRASES[tuple(_v.split())] = _key
_MAX_PHRASE = max(len(p) for p in _PHRASES)

_SYNONYMS: dict[str, str] = {}
for _key, _variants in {
    "k8s": "kubernetes kube",
    "postgres": "postgresql postgre pg psql",
    "mongodb": "mongo",
    "db": "database databases dbs",
    "prod": "production",
    "preprod": "pre-prod preproduction pre-production",
    "staging": "stage stg",
    "dev": "development develop",
    "env": "environment environments envs",
    "repo": "repository repositories repos",
    "config": "configuration configurations cfg conf configs",
    "js": "javascript",
    "ts": "typescript",
    "node": "node.js nodejs",
    "python": "py python3",
    "cred": "credentials credential creds",
    "msg": "message messages msgs",
    "authn": "authentication authenticate",
    "authz": "authorization authorisation authorize authorise",
    "infra": "infrastructure",
    "doc": "docs documentation document documents",
    "app": "application applications apps",
    "request": "req reqs requests",
    "char": "chars character characters",
    "memory": "ram mem",
    "max": "maximum",
    "min": "minimum",
    "pr": "prs",
    "start": "begin begins began starts started commence commences commenced",
    "ship": "deployment deploys deploy deployed deploying deployments",
    "write": "written wrote writes implemented implement coded",
    "run": "ran runs running execute executed executes",
    "keep": "retain retained retains retention store stored stores kept save saved persist persisted",
    "choose": "chose chosen pick picked select selected",
    "get": "got gotten receive received",
    "send": "sent sends",
    "build": "built builds",
    "acknowledge": "ack acks acked acknowledges acknowledged",
    "connection": "conn conns connections",
    "own": "owns owned owner owners responsible ownership",
    "job": "cron crons",
    "percent": "pct percentage",
    "outdated": "out-of-date stale obsolete",
    "rollback": "rollbacks",
    "approve": "approves approved approval approvals",
    "library": "libraries dependency dependencies dep deps lib libs package packages",
    "second": "sec secs",
    "microservice": "microservices",
    "service": "svc svcs",
    "weekday": "weekdays",
    "email": "e-mail emails",
    "host": "hosted hosts hosting",
    "test": "tests tested testing",
}.items():
    for _v in _variants.split():
        _SYNONYMS[_v] = _key
_IRREGULAR = {
    "ran": "run", "went": "go", "gone": "go", "goes": "go", "made": "make", "held": "hold", "taken": "take",
    "took": "take", "children": "child", "people": "person", "kept": "keep", "led": "lead", "paid": "pay",
    "said": "say", "sold": "sell", "told": "tell", "found": "find", "began": "begin", "begun": "begin",
    "chose": "choose", "chosen": "choose", "wrote": "write", "written": "write", "drove": "drive",
    "driven": "drive", "spent": "spend", "sent": "send", "built": "build", "bought": "buy", "brought": "bring",
    "thought": "think", "caught": "catch", "taught": "teach", "met": "meet", "ate": "eat", "eaten": "eat",
    "gave": "give", "given": "give", "known": "know", "knew": "know", "shown": "show", "grew": "grow",
    "grown": "grow", "broke": "break", "broken": "break", "froze": "freeze", "frozen": "freeze",
}  # fmt: skip
# Lower-case names of tools, languages and formats: swapping one for another changes a claim.
_KNOWN_NAMES = _wordlist(
    """k8s postgres mysql sqlite mariadb mongodb redis memcached kafka rabbitmq sqs sns nats pulsar
    jenkins circleci gha travis buildkite gitlab github bitbucket sentry rollbar datadog honeycomb
    jaeger grafana prometheus loki kibana elk splunk pagerduty opsgenie slack zoom jira
    confluence pnpm yarn npm pip poetry conda cargo maven gradle ruff mypy isort flake8
    pylint eslint prettier pytest jest vitest mocha webpack vite docker podman terraform pulumi
    ansible helm argocd nginx haproxy envoy traefik cloudflare fastly akamai cloudfront
    s3 gcs ses ecr gcr ghcr ecs eks gke aks ec2 rds aurora dynamodb bigquery snowflake redshift
    clickhouse elasticsearch opensearch solr airflow dagster dbt flink celery sidekiq rq
    django flask fastapi laravel nextjs react vue angular svelte python golang js ts
    java kotlin ruby php scala elixir deno json yaml toml xml csv html markdown
    protobuf avro parquet plaintext grpc graphql soap http https ssh sftp ftp oauth saml jwt
    vault launchdarkly unleash stripe paypal braintree twilio postmark sendgrid mailgun okta auth0
    linux ubuntu debian alpine centos windows macos ios android chrome firefox vim emacs
    vscode pycharm intellij obsidian tabs spaces squash rebase camelcase pascalcase snake_case
    kebab-case monorepo polyrepo gitflow utc cet pst"""
)
_ENVS = frozenset({"prod", "staging", "dev", "preprod", "qa", "sandbox", "uat"})
_DAYS = {
    "monday": "monday", "mon": "monday", "tuesday": "tuesday", "tue": "tuesday", "tues": "tuesday",
    "wednesday": "wednesday", "wed": "wednesday", "thursday": "thursday", "thu": "thursday",
    "thurs": "thursday", "friday": "friday", "fri": "friday", "saturday": "saturday", "sat": "saturday",
    "sunday": "sunday", "sun": "sunday", "weekday": "weekday", "weekend": "weekend",
}  # fmt: skip
_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
    "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9,
    "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}  # fmt: skip

# ---------------------------------------------------------------- quantities

_NUMBER_VALUES = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "dozen": 12,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_SECONDS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "msec": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "wk": 604800, "wks": 604800, "week": 604800, "weeks": 604800,
    "fortnight": 1_209_600, "fortnights": 1_209_600,
    "month": 2_628_000, "months": 2_628_000, "mo": 2_628_000,
    "quarter": 7_862_400, "quarters": 7_862_400,
    "y": 31_536_000, "yr": 31_536_000, "yrs": 31_536_000, "year": 31_536_000, "years": 31_536_000,
}  # fmt: skip
_BYTES = {
    "b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10,
    "mib": 2**20, "gib": 2**30, "tib": 2**40, "kilobyte": 1e3, "kilobytes": 1e3, "megabyte": 1e6,
    "megabytes": 1e6, "gigabyte": 1e9, "gigabytes": 1e9, "terabyte": 1e12, "terabytes": 1e12,
}  # fmt: skip
_METRES = {"km": 1000, "kilometre": 1000, "kilometres": 1000, "kilometer": 1000, "kilometers": 1000, "mile": 1609, "miles": 1609, "metre": 1, "metres": 1, "meter": 1, "meters": 1}  # fmt: skip
_MONEY = {"$": 1, "usd": 1, "dollar": 1, "dollars": 1, "€": 1, "eur": 1, "euro": 1, "euros": 1, "£": 1, "gbp": 1, "pounds": 1}  # fmt: skip
_PERCENT = {"%": 0.01, "percent": 0.01, "pct": 0.01, "per cent": 0.01}
_FREQ_WORDS = {"hourly": 24.0, "daily": 1.0, "nightly": 1.0, "weekly": 1 / 7, "biweekly": 1 / 14, "fortnightly": 1 / 14, "monthly": 1 / 30, "quarterly": 1 / 91, "yearly": 1 / 365, "annually": 1 / 365}  # fmt: skip
_TIMES = {"once": 1, "twice": 2, "thrice": 3}
_DURATION_PREPOSITIONS = frozenset(
    {
        "for",
        "within",
        "in",
        "after",
        "than",
        "of",
        "about",
        "under",
        "over",
        "least",
        "most",
        "to",
        "is",
        "be",
        "takes",
        "take",
    }
)


@dataclass(frozen=True)
class _Qty:
    dim: str  # time, size, length, money, percent, freq, clock, date, count
    value: float
    noun: str  # what a bare count counts ("replica"), or ""
    surface: str

    def agrees(self, other: _Qty) -> bool:
        if self.dim != other.dim and not self.compatible(other):
            return False
        if self.dim == "date":
            return _dates_agree(self.value, other.value)
        a, b = self.value, other.value
        # sizes: 1 GB ≈ 1024 MB; durations and rates: 30 days ≈ a month, 12 months = a year
        tolerance = {"size": 0.05, "time": 0.02, "freq": 0.02}.get(self.dim, 1e-6)
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-9)

    def compatible(self, other: _Qty) -> bool:
        if self.dim == other.dim:
            return self.dim != "count" or not (self.noun and other.noun) or self.noun == other.noun
        dims = {self.dim, other.dim}
        # "80%" and a bare "0.75" are both fractions
        return dims == {"percent", "count"} and min(self.value, other.value) <= 1 and not (self.noun or other.noun)


def _dates_agree(a: float, b: float) -> bool:
    ya, ma, da = int(a) // 10000, int(a) // 100 % 100, int(a) % 100
    yb, mb, db = int(b) // 10000, int(b) // 100 % 100, int(b) % 100
    return (ya == yb or not ya or not yb) and ma == mb and (da == db or not da or not db)


_NUM = r"\d[\d,]*(?:\.\d+)?"
# Where a pattern may start at every digit of "1,1,1,…" (at each word boundary) and fail only after
# the number, an unbounded number would be read again from each of its digits: quadratic (issue 33).
# 24 digits and commas: more than any count of times a real text says.
_SHORT_NUM = r"\d[\d,]{0,23}(?:\.\d+)?"
# At most six words before the last ("twenty five", "a hundred"): unbounded, every word of "a a a …"
# started a match that read to the end of the run before failing — quadratic (issue 33).
_WORDNUM = r"(?:(?:a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ]?){0,6}(?:hundred|thousand|million|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|dozen)"
_UNIT_WORDS = sorted(
    [*_SECONDS, *_BYTES, *_METRES, "percent", "pct", "per cent", "dollars", "dollar", "euros", "euro", "usd", "eur"],
    key=len,
    reverse=True,
)
_UNIT = "|".join(re.escape(u) for u in _UNIT_WORDS)
_TIME_UNIT = "|".join(re.escape(u) for u in sorted(_SECONDS, key=len, reverse=True))
_NOT_IN_WORD = r"(?<![\w.#/@:-])"
_QTY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("cron", re.compile(r"`?(\d{1,2}|\*) (\d{1,2}|\*) \* \* \*`?")),
    ("iso", re.compile(_NOT_IN_WORD + r"(\d{4})-(\d{2})-(\d{2})(?![\w-])")),
    (
        "date",
        re.compile(
            r"\b(?:(\d{1,2})(?:st|nd|rd|th)? ("
            + "|".join(_MONTHS)
            + r")\.?|("
            + "|".join(_MONTHS)
            + r")\.? (\d{1,2})(?:st|nd|rd|th)?)(?:,? (\d{4}))?(?:\s?-\s?(\d{1,2})\b(?!:))?(?![\w:])"
        ),
    ),
    (
        "month",
        re.compile(
            r"\b(?:until|till|before|after|in|by|from|through|since|of|end of) (january|february|march|april|june|july|august|september|october|november|december)\b"
        ),
    ),
    ("clock", re.compile(_NOT_IN_WORD + r"(\d{1,2}):(\d{2})(?:\s?([ap])\.?m\.?\b)?")),
    ("clock12", re.compile(_NOT_IN_WORD + r"(\d{1,2})\s?([ap])\.?m\.?(?![\w])")),
    ("midnight", re.compile(r"\b(midnight|noon|midday)\b")),
    (
        "times",
        re.compile(
            r"\b(once|twice|thrice|("
            + _SHORT_NUM
            + r"|"
            + _WORDNUM
            + r")\s?(?:times|x)) (?:a|an|per|every|each) ("
            + _TIME_UNIT
            + r")\b"
        ),
    ),
    (
        "every",
        re.compile(
            r"\b(?:every|each) (?:("
            + _NUM
            + r"|"
            + _WORDNUM
            + r"|other) )?("
            + _TIME_UNIT
            + r"|morning|evening|night|weekday)\b"
        ),
    ),
    (
        "timesword",
        re.compile(
            r"\b(once|twice|thrice|("
            + _SHORT_NUM
            + r"|"
            + _WORDNUM
            + r")\s?(?:times|x)) ("
            + "|".join(_FREQ_WORDS)
            + r")\b"
        ),
    ),
    ("freqword", re.compile(r"\b(" + "|".join(_FREQ_WORDS) + r")\b")),
    (
        "quarter",
        re.compile(r"\b(three quarters|a quarter|one quarter|half|a half) (?:of )?(?:an? )?(" + _UNIT + r")\b"),
    ),
    ("money", re.compile(r"([$€£])\s?(" + _NUM + r")(k|m)?\b")),
    ("num", re.compile(_NOT_IN_WORD + r"(" + _NUM + r")(k\b)?\s?(" + _UNIT + r"|%)?(?:\b|(?<=%))(?![-/.]\w)")),
    ("wordnum", re.compile(r"\b(" + _WORDNUM + r")(?:[- ](" + _UNIT + r"))?\b")),
    ("per", re.compile(r"(?:\bper |/|\b(?:a|an) )(" + _TIME_UNIT + r")\b")),
]


def _parse_number(text: str) -> float | None:
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, current = 0.0, 0.0
    seen = False
    for word in re.split(r"[- ]+", text):
        if word in ("a", "an"):
            continue
        elif word in _NUMBER_VALUES:
            current += _NUMBER_VALUES[word]
            seen = True
        elif word in _SCALES:
            current = (current or 1) * _SCALES[word]
            seen = True
            if _SCALES[word] >= 1000:
                total, current = total + current, 0.0
        elif word == "other":
            current = 2
            seen = True
        else:
            return None
    return total + current if seen else None


def _unit_quantity(value: float, unit: str | None, surface: str, noun: str = "") -> _Qty:
    unit = (unit or "").lower()
    if unit in _SECONDS:
        return _Qty("time", value * _SECONDS[unit], "", surface)
    if unit in _BYTES:
        return _Qty("size", value * _BYTES[unit], "", surface)
    if unit in _METRES:
        return _Qty("length", value * _METRES[unit], "", surface)
    if unit in _PERCENT:
        return _Qty("percent", value * 0.01, "", surface)
    if unit in _MONEY:
        return _Qty("money", value, "", surface)
    return _Qty("count", value, noun, surface)


def _mark(index: int) -> str:
    """A placeholder no quantity pattern can match again (they all read lower case)."""
    letters = ""
    while True:
        index, digit = divmod(index, 26)
        letters = chr(65 + digit) + letters
        if not index:
            return "§" + letters


def _unmark(mark: str) -> int:
    index = 0
    for c in mark[1:]:
        index = index * 26 + ord(c) - 65
    return index


def _extract_quantities(text: str) -> tuple[str, list[_Qty]]:
    """Replace every quantity in lower-cased `text` by a placeholder (`§A`, `§B`…) and return them
    in placeholder order."""
    found: list[_Qty] = []

    def keep(*qtys: _Qty) -> str:
        marks = []
        for q in qtys:
            found.append(q)
            marks.append(f" {_mark(len(found) - 1)} ")
        return "".join(marks)

    for kind, pattern in _QTY_PATTERNS:
        text = pattern.sub(functools.partial(_quantity_match, kind, keep=keep), text)
    return text, found


def _word_before(text: str, at: int) -> str:
    """The last whitespace-separated word of `text[:at]` ("" if none): `text[:at].split()[-1]`
    without splitting the whole prefix again at every match (quadratic on "a day a day …")."""
    end = at
    while end and text[end - 1].isspace():
        end -= 1
    start = end
    while start and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def _quantity_match(kind: str, m: re.Match[str], keep: Callable[..., str]) -> str:
    s = m.group(0).strip()
    if kind == "cron":
        minute, hour = m.group(1), m.group(2)
        if minute.isdigit() and hour.isdigit():
            return keep(_Qty("freq", 1.0, "", s), _Qty("clock", int(hour) * 60 + int(minute), "", s))
        return m.group(0)
    if kind == "iso":
        return keep(_Qty("date", int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3)), "", s))
    if kind == "date":
        day = m.group(1) or m.group(4)
        month = _MONTHS[(m.group(2) or m.group(3)).lower()]
        if (m.group(3) or "").lower() == "may" and not m.group(4):
            return m.group(0)
        year = int(m.group(5)) if m.group(5) else 0
        qtys = [_Qty("date", year * 10000 + month * 100 + int(day), "", s)]
        if m.group(6):
            qtys.append(_Qty("date", year * 10000 + month * 100 + int(m.group(6)), "", s))
        return keep(*qtys)
    if kind == "month":
        prefix = m.group(0)[: -len(m.group(1))]
        return prefix + keep(_Qty("date", _MONTHS[m.group(1)] * 100, "", s))
    if kind == "clock":
        hour, minute = int(m.group(1)), int(m.group(2))
        if m.group(3) == "p" and hour < 12:
            hour += 12
        if m.group(3) == "a" and hour == 12:
            hour = 0
        return keep(_Qty("clock", hour * 60 + minute, "", s))
    if kind == "clock12":
        hour = int(m.group(1)) % 12 + (12 if m.group(2) == "p" else 0)
        return keep(_Qty("clock", hour * 60, "", s))
    if kind == "midnight":
        return keep(_Qty("clock", 0 if m.group(1) == "midnight" else 720, "", s))
    if kind == "times":
        count = _TIMES.get(m.group(1)) or _parse_number(m.group(2) or "") or 1
        return keep(_Qty("freq", count * 86400 / _SECONDS[m.group(3)], "", s))
    if kind == "every":
        unit = m.group(2)
        if unit == "night":
            return keep(_Qty("freq", 1.0, "", s))
        if unit in ("morning", "evening"):
            return keep(_Qty("freq", 1.0, "", s)) + f" {unit} "
        if unit == "weekday":
            return " weekday "
        n = _parse_number(m.group(1)) if m.group(1) else 1
        return keep(_Qty("freq", 86400 / ((n or 1) * _SECONDS[unit]), "", s))
    if kind == "timesword":
        count = _TIMES.get(m.group(1)) or _parse_number(m.group(2) or "") or 1
        return keep(_Qty("freq", count * _FREQ_WORDS[m.group(3)], "", s))
    if kind == "freqword":
        return keep(_Qty("freq", _FREQ_WORDS[m.group(1)], "", s))
    if kind == "quarter":
        fraction = {"three quarters": 0.75, "a quarter": 0.25, "one quarter": 0.25, "half": 0.5, "a half": 0.5}[
            m.group(1)
        ]
        return keep(_unit_quantity(fraction, m.group(2), s))
    if kind == "money":
        value = float(m.group(2).replace(",", "")) * {"k": 1e3, "m": 1e6}.get(m.group(3) or "", 1)
        return keep(_Qty("money", value, "", s))
    if kind == "num":
        value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) else 1)
        unit = m.group(3)
        if unit == "%":
            return keep(_Qty("percent", value / 100, "", s))
        if unit in ("m", "min") and re.search(r"\.\d\d", m.group(1)):
            return keep(_Qty("count", value, "", m.group(1))) + f" {unit} "  # "Py 3.12 min": a version
        return keep(_unit_quantity(value, unit, s))
    if kind == "wordnum":
        number = _parse_number(m.group(1))
        if number is None:
            return m.group(0)
        # "one" alone is a pronoun far more often than a number ("the new one")
        if m.group(1) == "one" and not m.group(2):
            return m.group(0)
        return keep(_unit_quantity(number, m.group(2), s))
    if kind == "per":
        if not s.startswith(("per", "/")) and _word_before(m.string, m.start()) in _DURATION_PREPOSITIONS:
            return keep(_Qty("time", _SECONDS[m.group(1)], "", s))  # "within an hour" is a duration
        return keep(_Qty("freq", 86400 / _SECONDS[m.group(1)], "", s))
    return m.group(0)


# ---------------------------------------------------------------- reading a text


@dataclass
class _Token:
    key: str  # what is compared: folded, stemmed, or the quantity's dimension ("q:time")
    kind: str  # word, name, id, env, day or qty
    surface: str  # as written (lower case), for reasons
    qty: _Qty | None = None
    capital: bool = False  # a capitalised word opening a sentence: perhaps a name ("Dana is…")
    weak: bool = False  # claims little ("use", "lives", "user"): never counted as a difference
    acronym: bool = False  # written in capitals (CPU, RTO)
    listed: bool = False  # an item of a list: next to a token of its type across `,` / and / or
    at: int = 0  # its place among the words read


@dataclass
class _Reading:
    tokens: list[_Token]  # content tokens, in order
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


_TOKEN = re.compile(r"§[A-Z]+|[#@$/]?[^\W_][\w.:/+#@'-]*[\w+#/]|[^\W_]|[:;,]")
_RAW_WORD = re.compile(r"[^\W\d_][\w.:/+#-]*[\w+#]|[^\W\d_]")
_ID_SEPARATORS = re.compile(r"[-_./:#@=]")
# Words that weaken or scope a claim: one text saying it, the other not, is no restatement.
_CONTRASTS = frozenset({"over", "than", "rather", "instead", "versus", "vs"})
_HEDGES = _wordlist(
    """may might can could maybe perhaps possibly probably likely unlikely sometimes occasionally rarely
    seldom often almost nearly partially partly mostly temporarily tentatively some several few except"""
)
_AUXILIARIES = _wordlist("is are was were be been has have had must should shall will would can could may might")
_COPULAS = frozenset({"is", "are", "be", "was", "were", "stays", "stay", "turned", "switched", "flag", "remains"})
# "like" is a liking only after these ("the user likes", "would like"), else an example
_LIKE_SUBJECTS = _wordlist("would 'd not do does did really also user users they we i you to people customers")


def _stem(word: str) -> str:
    """A light suffix stripper: enough for plurals, tenses and -ly/-ment/-al derivations."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
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


_KNOWN_STEMS = frozenset(_stem(n) for n in _KNOWN_NAMES if n.isalpha())
_STEMMED_POLAR = {_stem(w): w for w in [*_NEGATORS, *_POLAR] if w.isalpha() and len(w) > 3}


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
        for index, m in enumerate(_RAW_WORD.finditer(sentence)):
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
        for size in range(min(_MAX_PHRASE, len(raw) - i), 0, -1):
            key = _PHRASES.get(tuple(raw[i : i + size]))
            if key:
                words.append(key)
                i += size
                break
        else:
            words.append(raw[i])
            i += 1
    return words


@functools.lru_cache(maxsize=4096)
def _read(text: str) -> _Reading:
    """Read a text once (cached: the write path compares each live fact with every proposal)."""
    prepared = _prepare(text)
    names, openers, acronyms = _names(prepared)
    lowered, qtys = _extract_quantities(prepared.lower().replace("`", " "))
    raw: list[str] = []
    for w in _TOKEN.findall(lowered):
        w = w.strip("'").removesuffix("'s")
        if "-" in w and w not in names and w not in _SYNONYMS and w not in _POLAR and re.fullmatch(r"[a-z-]+", w):
            raw.extend(p for p in w.split("-") if p)  # "night-shift", "third-party"
        elif w:
            raw.append(w)
    words = _fold_phrases(raw)
    tokens: list[_Token] = []
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
            q = qtys[_unmark(word)]
            if q.dim == "count" and nxt.isalpha() and nxt not in _STOP and nxt not in _WEAK:
                q = _Qty(q.dim, q.value, _stem(_SYNONYMS.get(nxt, nxt)), q.surface)  # "3 replicas"
            last = tokens[-1] if tokens else None
            if (
                q.dim == "time"
                and last is not None
                and last.qty is not None
                and last.qty.dim == "time"
                and last.qty.value > q.value
                and (last.at == index - 1 or (last.at == index - 2 and prev == "and"))
            ):  # "2 hours 30 minutes" is one duration
                merged = _Qty("time", last.qty.value + q.value, "", f"{last.qty.surface} {q.surface}")
                tokens[-1] = _Token("q:time", "qty", merged.surface, merged, at=index)
                continue
            tokens.append(_Token(f"q:{q.dim}", "qty", q.surface, q, at=index))
            continue
        if word in (":", ";", ",", "="):
            continue
        if word == "last" and nxt.startswith("§"):
            continue  # "sprints last two weeks": a duration, not the last step
        if word in ("after", "before", "until") and nxt.startswith("§"):
            bounds.add(1 if word == "after" else -1)  # "within 5 days" ≠ "after 5 days"
            continue
        if word in _ORDER_WORDS:
            explicit = True
            if word not in ("first", "second", "third", "last"):
                continue
        if word in _ADDITIVE and (word not in ("too", "well") or nxt in ("", ",", ";", ".")):
            additive = True
            continue
        if word in _UPDATE:
            # "deploy only after the tests pass" states a condition, not a narrowed claim
            if not (word == "only" and nxt in ("after", "before", "once", "when", "if", "until")):
                update = True
                only = only or word in ("only", "sole", "solely")
            if word in ("now", "instead", "only", "sole", "solely", "anymore", "longer"):
                continue
        past = past or word in ("was", "were", "formerly", "previously")
        if word not in _NEGATORS and word not in _POLAR and _stem(word) in _STEMMED_POLAR:
            word = _STEMMED_POLAR[_stem(word)]  # "avoids", "forbids", "excludes"
        if word in _NEGATORS:
            if word == "not" and (nxt in names or nxt.startswith("§")):
                contrasts.append(index)
                continue  # "Kafka, not RabbitMQ" contrasts a name; it does not deny the sentence
            negations += 1
            polar.append(word)
        elif word == "on" and prev in _COPULAS and nxt in ("", ",", ";", "in", "for", "at", "by", "on", "and", "but"):
            polar.append(word)  # "DEBUG is on in staging"
        elif word == "off" and (prev in _COPULAS or prev in (":", "=")):
            negations += 1  # "DEBUG is off in prod", not "a day off"
            polar.append(word)
        elif word == "like" and prev not in _LIKE_SUBJECTS:
            continue  # "like `order_items`" gives an example
        elif word in _POLAR:
            negations += _POLAR[word][1] < 0
            polar.append(word)
        elif word in _CONTRASTS and not nxt.startswith("§") and prev not in _BOUND:
            contrasts.append(index)  # "email over Slack", "Postgres rather than MongoDB"
        elif word in _BOUND:
            bounds.add(_BOUND[word])
        elif word not in _STOP or (word in names and len(word) > 1 and word != "i"):  # "US" is no "us"
            token = _token(word, names, openers)
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
    ids = {p for t in tokens if t.kind == "id" for p in _ID_SEPARATORS.split(t.key) if p}
    for x, y in itertools.pairwise(tokens):
        if set(words[x.at + 1 : y.at]) & {",", "and", "or"}:
            x.listed = y.listed = True
    steps = _steps(words, names)
    preferred = set()
    for t in tokens:  # "from Postgres to MySQL" / "from MySQL to Postgres"
        role = words[t.at - 1] if t.at else ""
        if _typed(t) and role in ("from", "to", "into", "onto"):
            preferred.add((t.key, "→" if role == "from" else "←"))
    strong = [t for t in tokens if not t.weak]  # in the order read: `at` ascends
    places = [t.at for t in strong]
    for at in contrasts:  # the strong tokens either side of "over", "not", "rather than"…
        before, after = bisect.bisect_left(places, at), bisect.bisect_right(places, at)
        if before and after < len(strong):
            preferred.add((strong[before - 1].key, strong[after].key))
    possible = any(w in _HEDGES for w in words)  # "can" and "cannot" alike: the negation is the polarity
    verb_at = next((k for k, w in enumerate(words) if w in _AUXILIARIES), 10**6)
    return _Reading(
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


def _token(word: str, names: set[str], openers: set[str]) -> _Token:
    key = _SYNONYMS.get(word, word)
    if key in _ENVS:
        return _Token(key, "env", word)
    day = _DAYS.get(key) or _DAYS.get(_stem(key))
    if day:
        return _Token(day, "day", word)
    if word == "go" and word in names:  # "written in Go", not "deploys go out"
        return _Token("golang", "name", word)
    if word in _WEAK or key in _WEAK:
        return _Token(_stem(key), "word", word, weak=True)
    if key in _KNOWN_NAMES or _stem(key) in _KNOWN_STEMS:
        return _Token(_stem(key) if key.isalpha() else key, "name", word)
    if any(c.isdigit() for c in key) or any(c in key for c in "_./:#@") or (word in names and "-" in word):
        return _Token(key, "id", word)
    if word in names:
        return _Token(_stem(key) if key.isalpha() else key, "name", word)
    stemmed = _stem(key)
    key = _SYNONYMS.get(stemmed, stemmed)
    return _Token(key, "word", word, capital=word in openers, weak=key in _WEAK)


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
            if w not in _STOP and w not in _ORDER_WORDS and w not in _NEGATORS and w not in _UPDATE
            if not w.startswith("§") and w not in (",", ";", ":", "=")
            for t in [_token(w, names, set())]
            if not t.weak
        }
        if keys:
            steps.append(keys)
    return steps if len(steps) >= 2 else None


# ---------------------------------------------------------------- the reading budget (issue 33)
#
# A fact may be 16,000 characters long, and an agent may write as many as it likes on one topic:
# reading must cost a bounded amount of CPU whatever the text. Every reader above is linear in
# its input (tests/memory/test_classifier_hostile.py times them on bench/hostile_text.py's worst
# cases); on top of that:
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


class _TooLong(Exception):
    """A comparison spent its budget."""


class _Budget:
    """Steps left for comparing; `spend` raises _TooLong past zero."""

    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _TooLong


def _window(text: str) -> str:
    """What of `text` is read: all of it up to READ_CHARS characters, else its first READ_CHARS
    cut at the last whitespace (or mid-word when there is none in the second half)."""
    if len(text) <= READ_CHARS:
        return text
    head = text[: READ_CHARS + 1]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut >= READ_CHARS // 2 else head[:READ_CHARS]


def _read_whole(text: str) -> bool:
    return len(text) <= READ_CHARS


# ---------------------------------------------------------------- aligning two readings


def _close_spelling(a: str, b: str) -> bool:
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
    agreeing: list[tuple[_Qty, _Qty]]  # quantities written differently that agree ("60 s" = "1 min")


def _align(a: _Reading, b: _Reading, budget: _Budget) -> _Diff:
    """What each text says that the other does not (weak words aside)."""
    keys_a = {t.key for t in a.tokens if t.qty is None}
    keys_b = {t.key for t in b.tokens if t.qty is None}
    only_a = {i for i, t in enumerate(a.tokens) if not t.weak and (t.qty is not None or t.key not in keys_b)}
    only_b = {j for j, t in enumerate(b.tokens) if not t.weak and (t.qty is not None or t.key not in keys_a)}
    agreeing: list[tuple[_Qty, _Qty]] = []
    for i in sorted(only_a):
        x = a.tokens[i]
        budget.spend(len(only_b))
        for j in sorted(only_b):
            y = b.tokens[j]
            if x.qty and y.qty and x.qty.agrees(y.qty):
                if x.qty.surface.replace(" ", "") != y.qty.surface.replace(" ", ""):
                    agreeing.append((x.qty, y.qty))
            elif x.qty or y.qty or not (_close_spelling(x.key, y.key) or _same_lemma(x.key, y.key)):
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
    shared_parts = {p for key in shared_ids for p in _ID_SEPARATORS.split(key) if p}
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


def _spelled_out(t: _Token, keys: set[str]) -> bool:
    """An identifier whose every part the other text (its token `keys`) says in words
    (`@priya.natarajan` / "Priya Natarajan", `billing-svc` / "the billing service")."""
    parts = [p for p in _ID_SEPARATORS.split(t.key) if p]
    return len(parts) >= 2 and all(p.isalpha() and _token(p, set(), set()).key in keys for p in parts)


def _spelled_acronym(t: _Token, initials: str) -> list[int]:
    """The tokens of the other text (the first letters of its tokens: `initials`) that spell the
    acronym `t`, if any."""
    letters = t.surface
    if not (t.acronym and letters.isalpha() and 2 <= len(letters) <= 5):
        return []
    at = initials.find(letters)
    return list(range(at, at + len(letters))) if at >= 0 else []


def _order(a: _Reading, b: _Reading, budget: _Budget) -> str:
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

_TYPED = frozenset({"name", "id", "env", "day", "qty"})


def _typed(t: _Token) -> bool:
    """A value a claim can be about or set: a number, a name, an identifier, an environment, a day."""
    return t.kind in _TYPED


def _valueish(t: _Token) -> bool:
    """A value, or a capitalised word opening a sentence that may be a name ("Dana is on call")."""
    return t.kind in _TYPED or t.capital


def _same_kind(x: _Token, y: _Token) -> bool:
    """Tokens one could stand in for the other: numbers of one dimension (counting the same thing),
    names and identifiers, environments, days; a capitalised opener may be a name ("Dana")."""
    if x.qty and y.qty:
        return x.qty.compatible(y.qty)
    if x.qty or y.qty:
        return False
    kinds = {"name" if t.capital else t.kind for t in (x, y)}
    return len(kinds) == 1 or kinds <= {"name", "id"}


def _strong_sides(r: _Reading) -> tuple[list[int], list[int]]:
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
    r: _Reading, index: int, changed: set[int], paired: dict[int, int], sides: tuple[list[int], list[int]]
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


def _substitutions(a: _Reading, b: _Reading, diff: _Diff, budget: _Budget) -> list[tuple[int, int]]:
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


def _one_slot(a: _Reading, b: _Reading, subs: list[tuple[int, int]]) -> bool:
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


def _at_subject(r: _Reading, index: int) -> bool:
    """The token names what the claim is about: it comes before the text's first verb `is` /
    `was` / `has`… ("Bug #1201 is fixed in v2.4.1", "The payments service timeout is 10 s"), or
    is its first strong token when it has no such verb ("Priya owns the billing service")."""
    strong = [i for i, t in enumerate(r.tokens) if not t.weak]
    if r.tokens[index].at > r.verb_at:
        return False
    return r.verb_at < 10**6 or index == strong[0]


def _polar_axes(r: _Reading) -> set[str]:
    return {_POLAR[w][0] if w in _POLAR else "on" for w in r.polar if w not in _NEGATORS}


def _negative(word: str) -> bool:
    return word in _NEGATORS or word == "off" or (word in _POLAR and _POLAR[word][1] < 0)


def _polarity_alike(a: _Reading, b: _Reading) -> bool:
    """Equal parity is not enough to call two texts the same: "not disabled" = "enabled" and
    "no deploys" = "deploys are prohibited", but "shared" ≠ "private cache; nothing is shared"."""
    axes_a, axes_b = _polar_axes(a), _polar_axes(b)
    if axes_a == axes_b:
        return True
    if not (any(map(_negative, a.polar)) or any(map(_negative, b.polar))):
        # "backups run daily" / "… and are encrypted": one asserts a state the other does not; a
        # liking, a permission or a need ("enjoys", "allows", "needs") is mere wording
        return not (axes_a ^ axes_b) - _ATTITUDES
    if not a.polar or not b.polar:
        return False
    return bool(axes_a & axes_b) or not axes_a or not axes_b


@dataclass
class _Comparison:
    """What differs between two readings, sorted by what it can mean."""

    subs: list[tuple[_Token, _Token]]  # a value replaced by another of its type, in its slot
    rest_a: list[_Token]  # what only the old text says (not replaced)
    rest_b: list[_Token]  # what only the new text says
    flipped: bool  # one text affirms what the other denies
    bound_flip: bool  # an upper bound where the other states a lower one
    order: str  # "", "explicit", "implicit" (see _order) or "reversed" ("x over y" / "y over x")
    modal: bool  # only one text hedges (may, can, sometimes, partly, except…)
    alike: bool  # the polar words of both texts are about the same things
    agreeing: list[tuple[_Qty, _Qty]]  # quantities written differently that agree
    subject: bool  # the one value replaced names what both texts are about (see _at_subject)
    beside_name: bool  # the one value replaced stands next to an unchanged name ("Bob Nguyen")
    narrowing: list[_Token]  # words the new text adds that may narrow what it is about
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


def _beside_name(r: _Reading, index: int, changed: set[int]) -> bool:
    return any(
        0 <= k < len(r.tokens) and k not in changed and r.tokens[k].kind == "name" and not r.tokens[k].acronym
        for k in (index - 1, index + 1)
    )


def _narrows(r: _Reading, index: int) -> bool:
    """An added word that may narrow the claim: it stands before the text's first verb `is` /
    `are`… ("the *admin* API rate limit is…") or opens a qualifier ("uses Redis *for* sessions")."""
    t = r.tokens[index]
    if t.weak or t.qty is not None:
        return False
    return t.at < r.verb_at < 10**6 or (t.at > 0 and r.words[t.at - 1] in _QUALIFIERS)


# Prepositions that open a qualifier: a phrase the other text lacks may narrow the claim.
_QUALIFIERS = _wordlist("for in on at during when while if with within from via under except per")


def _ordinal(r: _Reading, t: _Token) -> bool:
    return r.explicit and r.steps is not None and t.key in ("first", "second", "third", "last", "step")


def _reversed(a: _Reading, b: _Reading) -> bool:
    """The same two values the other way round: "email over Slack" / "Slack over email", "from
    Postgres to MySQL" / "from MySQL to Postgres"."""
    swapped = {(y, x) for x, y in a.preferred} | {(x, _OTHER_WAY[y]) for x, y in a.preferred if y in _OTHER_WAY}
    return bool(swapped & (b.preferred - a.preferred))


_OTHER_WAY = {"→": "←", "←": "→"}


def _compare(a: _Reading, b: _Reading, budget: _Budget) -> _Comparison:
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
    typed_rest = any(map(_typed, rest_a)) or any(map(_typed, rest_b))
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


def _show(tokens: list[_Token], limit: int = 3) -> str:
    return " ".join(f"`{t.surface}`" for t in tokens[:limit])


# ---------------------------------------------------------------- the verdict

# A restatement that adds words the other does not say (and drops none) must embed at least
# this close; one that only rewords (every content word aligned) at least SAME_FLOOR.
SAME_COSINE = 0.80
SAME_FLOOR = 0.50
# Below this cosine, texts that differ beyond one clean change are separate facts; above it a
# person is asked (UNSURE).
SEPARATE_COSINE = 0.72


def classify(old: str, new: str, similarity: float) -> Verdict:
    """Whether `new` restates, contradicts or is separate from `old` (a live fact on the same
    domain and topic), given the cosine of their embeddings; UNSURE when the wording cannot
    tell — both facts then stay live and a person decides. Pure, about 1 ms a pair (less when
    a text was read before); bounded whatever the texts (see READ_CHARS, COMPARE_STEPS)."""
    return _classify(old, new, similarity, _Budget(COMPARE_STEPS))[0]


def _classify(old: str, new: str, similarity: float, budget: _Budget) -> tuple[Verdict, bool]:
    """`classify`, spending `budget`; and whether both texts were read whole and compared in full
    (only then may the pair model revise the verdict)."""
    if normalise(old) == normalise(new):
        return Verdict(Relation.SAME, "same meaning: identical text"), True
    a, b = _read(_window(old)), _read(_window(new))
    try:
        c = _compare(a, b, budget)
    except _TooLong:
        return _too_long(a, b, similarity), False
    verdict = _verdict(a, b, c, similarity)
    if _read_whole(old) and _read_whole(new):
        return verdict, True
    if verdict.kind in (Relation.SAME, Relation.CONTRADICTS):
        detail = verdict.reason.split(": ", 1)[-1]
        verdict = Verdict(
            Relation.UNSURE, f"unsure: {detail}, in the first {READ_CHARS:,} characters (the rest was not read)"
        )
    return verdict, False


def _verdict(a: _Reading, b: _Reading, c: _Comparison, similarity: float) -> Verdict:
    changes = c.changes
    if not changes:
        return _restated(a, b, c, similarity)
    if c.rest_a or c.rest_b or (len(changes) > 1 and c.slots > 1):
        return _undecided(c, similarity, changes[0])
    return _contradicted(a, b, c, changes[0], similarity)


def _too_long(a: _Reading, b: _Reading, similarity: float) -> Verdict:
    """The verdict of a pair whose comparison spent its budget: no machine decides it."""
    detail = f"too long to compare word by word ({len(a.tokens):,} and {len(b.tokens):,} words read)"
    if similarity < SEPARATE_COSINE:
        return Verdict(Relation.SEPARATE, f"separate: different claims ({detail})")
    return Verdict(Relation.UNSURE, f"unsure: {detail}")


def _restated(a: _Reading, b: _Reading, c: _Comparison, similarity: float) -> Verdict:
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
        and (all(map(_typed, one_side)) or (b.only and not c.rest_b))
    ):
        # "cut on Mondays and Wednesdays" / "on Mondays, Wednesdays and Fridays", "accepts API
        # keys and OAuth tokens" / "accepts OAuth tokens only": the same list, changed
        verb = "adds" if c.rest_b else "drops"
        return Verdict(Relation.CONTRADICTS, f"contradicts: the list {verb} {_show(one_side)}")
    if (
        c.rest_a
        or any(map(_typed, c.rest_b))
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


def _contradicted(a: _Reading, b: _Reading, c: _Comparison, what: str, similarity: float) -> Verdict:
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


def _looks_like_value(t: _Token) -> bool:
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


# --- The second reading (issue 14, round 3) ------------------------------------------------------


@dataclass(frozen=True)
class SecondReading:
    """When the pair model (memory/pair_model.py) overrides the rules. Probabilities are the
    model's p(same), p(contradicts), p(separate) for (old, new); a threshold above 1 never fires.

    - the rules say SAME, the model p(contradicts) ≥ `doubt_same` → UNSURE (never swallow);
    - the rules say CONTRADICTS, the model p(same) ≥ `doubt_contradicts` → UNSURE (never supersede a
      restatement);
    - the rules are UNSURE: p(same) ≥ `settle_same` → SAME, else p(contradicts) ≥ `settle_contradicts`
      → CONTRADICTS, else p(separate) ≥ `settle_separate` → SEPARATE, else UNSURE;
    - the rules say SEPARATE (cosine ≥ SEPARATE_COSINE), p(contradicts) ≥ `doubt_separate` → UNSURE.

    Chosen by `python -m bench.eval_writes --tune` on out-of-author predictions of the
    development pairs (bench/train_pair_model.py --cv), never on held-out pairs."""

    doubt_same: float
    doubt_contradicts: float
    settle_same: float
    settle_contradicts: float
    settle_separate: float
    doubt_separate: float

    @classmethod
    def never(cls) -> SecondReading:
        """Thresholds that never fire (all above 1): the rules' verdicts stand unchanged."""
        return cls(*(NEVER,) * len(fields(cls)))


NEVER = 2.0  # a threshold no probability reaches


# Round 5, chosen on 2026-12-02 by `python -m bench.eval_writes --tune` on 2,004 pairs of authors
# C–F and K–N, each with a probability from a model trained without its two-author fold: the fewest
# unsure pairs with ≤ 1.5 % swallowed, ≤ 3.5 % restatements and ≤ 1.5 % separate facts superseded
# over all of them, and no author above 4 % / 8 % (there: 1.2 %, 3.0 %, 0.9 %, 23.5 % unsure). The
# model never merges on its own (settling SAME was never chosen: it swallowed); it supersedes an
# unsure pair only on p(contradicts) ≥ 0.9.
SECOND_READING = SecondReading(
    doubt_same=0.7,
    doubt_contradicts=0.8,
    settle_same=NEVER,
    settle_contradicts=0.9,
    settle_separate=0.3,
    doubt_separate=NEVER,
)


def second_reading(verdict: Verdict, p: tuple[float, float, float], similarity: float, t: SecondReading) -> Verdict:
    """The rules' verdict, revised by the pair model's probabilities under thresholds `t`."""
    same, contradicts, separate = p
    kind = verdict.kind
    if kind == Relation.SAME and contradicts >= t.doubt_same:
        return Verdict(
            Relation.UNSURE, f"unsure: reads alike, but may contradict ({verdict.reason.split(': ', 1)[-1]})"
        )
    if kind == Relation.CONTRADICTS and same >= t.doubt_contradicts:
        return Verdict(Relation.UNSURE, f"unsure: may say the same ({verdict.reason.split(': ', 1)[-1]})")
    if kind == Relation.UNSURE:
        detail = verdict.reason.split(": ", 1)[-1]
        if same >= t.settle_same:
            return Verdict(Relation.SAME, f"same meaning: read together ({detail})")
        if contradicts >= t.settle_contradicts:
            return Verdict(Relation.CONTRADICTS, f"contradicts: read together ({detail})")
        if separate >= t.settle_separate:
            return Verdict(Relation.SEPARATE, f"separate: read together, different claims ({detail})")
    if kind == Relation.SEPARATE and similarity >= SEPARATE_COSINE and contradicts >= t.doubt_separate:
        return Verdict(Relation.UNSURE, f"unsure: may contradict ({verdict.reason.split(': ', 1)[-1]})")
    return verdict


# What a proposal's pairs beyond its `nearest` closest facts are (classify_many).
_NOT_READ = Verdict(Relation.SEPARATE, "separate: not read (the proposal read nearer live facts of the topic)")


def _asks_model(verdict: Verdict, similarity: float, old: str, new: str) -> bool:
    """Whether the second reading may revise the rules' verdict: not for far-apart pairs the rules
    call separate, nor for the same text up to case, spacing and punctuation (the pair model
    once read "deploys ship every tuesday after the standup" as contradicting its capitalised,
    full-stopped original)."""
    if verdict.kind == Relation.SEPARATE and similarity < SEPARATE_COSINE:
        return False
    return normalise(old) != normalise(new)


def classify_many(items: list[tuple[str, str, float]], *, nearest: int | None = None) -> list[Verdict]:
    """`classify` for each (old, new, cosine), then the second reading for the pairs it may revise
    (one batch through the pair model). The rules alone when the model is off or not shipped.

    `nearest` (the write path: NEAREST_FACTS) bounds what one proposal costs: of the pairs
    sharing a `new` text, only the `nearest` closest by cosine are read, nearest first, as long
    as their windows fit in PROPOSAL_CHARS, sharing PROPOSAL_STEPS; the others are separate, not
    read."""
    from memory import pair_model

    verdicts: list[Verdict] = [_NOT_READ] * len(items)
    whole = [False] * len(items)
    if nearest is None:
        for i, (old, new, similarity) in enumerate(items):
            verdicts[i], whole[i] = _classify(old, new, similarity, _Budget(COMPARE_STEPS))
    else:
        proposals: dict[str, list[int]] = {}
        for i, (_, new, _) in enumerate(items):
            proposals.setdefault(new, []).append(i)
        for indices in proposals.values():
            left, chars = PROPOSAL_STEPS, PROPOSAL_CHARS
            for i in sorted(indices, key=lambda i: -items[i][2])[:nearest]:
                old, new, similarity = items[i]
                read = min(len(old), READ_CHARS)
                if read > chars:
                    continue
                chars -= read
                budget = _Budget(min(COMPARE_STEPS, left))
                verdicts[i], whole[i] = _classify(old, new, similarity, budget)
                left -= min(COMPARE_STEPS, left) - max(budget.left, 0)
    if not pair_model.enabled():
        return verdicts
    asked = [
        i
        for i, (v, (old, new, s)) in enumerate(zip(verdicts, items, strict=True))
        if whole[i] and _asks_model(v, s, old, new)
    ]
    if not asked:
        return verdicts
    probs = pair_model.probabilities([(items[i][0], items[i][1]) for i in asked])
    for i, p in zip(asked, probs, strict=True):
        verdicts[i] = second_reading(verdicts[i], (float(p[0]), float(p[1]), float(p[2])), items[i][2], SECOND_READING)
    return verdicts
