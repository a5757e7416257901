"""The write classifier (issue 14) with the real model: what a proposal means next to a live fact."""

import pytest

from bench import eval_writes
from memory.classifier import Relation, classify
from memory.embeddings import cosine, embed_texts


def _classify(old: str, new: str):
    a, b = embed_texts([old, new])
    return classify(old, new, cosine(a, b))


def test_spaces_and_tabs_are_not_the_same_indentation():
    verdict = _classify("Python code is indented with spaces.", "Python code is indented with tabs.")
    assert verdict.kind != Relation.SAME
    assert verdict.kind == Relation.CONTRADICTS
    assert "`tabs`" in verdict.reason and "`spaces`" in verdict.reason


def test_squash_and_rebase_are_not_the_same_merge():
    verdict = _classify("Feature branches are merged with squash.", "Feature branches are merged with rebase.")
    assert verdict.kind != Relation.SAME
    assert _classify("We squash-merge pull requests.", "We rebase-merge pull requests.").kind != Relation.SAME


def test_dropping_on_does_not_make_a_restatement_a_contradiction():
    verdict = _classify("Deploys ship every Tuesday.", "Deploys go out on Tuesdays.")
    assert verdict.kind == Relation.SAME


def test_numbers_are_compared_in_canonical_units():
    same = _classify("Requests time out after 60 s.", "Requests time out after one minute.")
    assert same.kind == Relation.SAME
    assert same.reason == "same meaning: numbers agree (60 s = one minute)"
    assert _classify("Requests time out after 60 s.", "Requests time out after 90 s.").kind == Relation.CONTRADICTS
    assert _classify("Backups run twice a day.", "Backups run every 12 hours.").kind == Relation.SAME
    assert _classify("Backups run every 6 hours.", "Backups run twice a day.").kind == Relation.CONTRADICTS
    assert _classify("Each worker gets 512 MiB of memory.", "Workers get half a GiB of RAM each.").kind == Relation.SAME
    assert _classify("Backups are kept for 30 days.", "Backups are kept for one month.").kind == Relation.SAME
    assert _classify("The call lasts 2.5 hours.", "The call lasts 2 hours 30 minutes.").kind == Relation.SAME


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("Deploys on Fridays are allowed.", "Deploys on Fridays are not allowed.", Relation.CONTRADICTS),
        (
            "The `new_checkout` flag is enabled in prod.",
            "`new_checkout` is disabled in production.",
            Relation.CONTRADICTS,
        ),
        ("Invoices can be edited.", "Invoices cannot be edited.", Relation.CONTRADICTS),
        ("The cache is not disabled.", "The cache is enabled.", Relation.SAME),
        ("The S3 bucket is private.", "The S3 bucket is not publicly accessible.", Relation.SAME),
        ("Do not deploy on Fridays.", "Friday deploys are forbidden.", Relation.SAME),
    ],
)
def test_negation_and_antonyms_set_what_a_text_asserts(old, new, expected):
    assert _classify(old, new).kind == expected


def test_steps_in_another_order_contradict_only_when_both_texts_state_the_order():
    verdict = _classify(
        "Run migrations first, then deploy the new app version.",
        "Deploy the new app version first, then run migrations.",
    )
    assert verdict.kind == Relation.CONTRADICTS
    assert _classify("Drain the node before upgrading it.", "Upgrade the node only after draining it.").kind == (
        Relation.SAME
    )
    # the old text lists the steps without saying they are an order: a person decides
    assert _classify(
        "Release: tag the commit, build the image, push to registry.",
        "Release: build the image, push to registry, then tag the commit.",
    ).kind == (Relation.UNSURE)


def test_a_different_subject_or_case_is_a_separate_fact():
    assert _classify("The payments service timeout is 10 s.", "The search service timeout is 10 s.").kind == (
        Relation.SEPARATE
    )
    assert _classify(
        "The orders service runs 3 replicas in production.", "The orders service runs 1 replica in staging."
    ).kind == (Relation.SEPARATE)
    assert _classify("Bug #1201 is fixed in v2.4.1.", "Bug #1202 is fixed in v2.4.1.").kind == Relation.SEPARATE


def test_a_list_that_gains_or_loses_an_item_contradicts():
    added = _classify(
        "Mobile releases are cut on Mondays and Wednesdays.",
        "Mobile releases are cut on Mondays, Wednesdays and Fridays.",
    )
    assert added.kind == Relation.CONTRADICTS
    assert "`fridays`" in added.reason
    assert _classify("The API accepts API keys and OAuth tokens.", "The API accepts OAuth tokens only.").kind == (
        Relation.CONTRADICTS
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alex lives in NYC.", "Alex used to live in NYC."),  # no longer true
        ("All services run on k8s.", "Some services run on k8s."),  # hedged
        (
            "The API rate limit is 100 requests per minute.",
            "The admin API rate limit is 100 requests per minute.",
        ),  # a narrower subject
        ("Jo prefers email over Slack.", "Jo prefers Slack over email."),  # the preference reversed
        ("Refunds are processed within 5 days.", "Refunds are processed after 5 days."),  # the bound reversed
        ("The user's brother lives in Chicago.", "The user's sister lives in Chicago."),  # a plain word replaced
        ("Bob Nguyen owns the billing service.", "Billing service owner: Robert Nguyen."),  # one person, or two?
    ],
)
def test_a_restatement_needs_every_word_value_and_qualifier_to_agree(old, new):
    assert _classify(old, new).kind != Relation.SAME


def test_a_reworded_restatement_with_the_same_values_is_the_same():
    assert _classify("Alex lives in NYC.", "Alex is based in New York City.").kind == Relation.SAME
    assert _classify("Max upload size is 1 GB.", "Uploads are capped at 1024 MB.").kind == Relation.SAME


def test_what_cannot_be_told_from_the_wording_is_unsure():
    for old, new in [
        ("The user's brother lives in Chicago.", "The user's sister lives in Chicago."),
        ("Bob Nguyen owns the billing service.", "Billing service owner: Robert Nguyen."),
        ("The user is vegetarian and drinks oat milk.", "The user is vegetarian and drinks almond milk."),
    ]:
        assert _classify(old, new).kind == Relation.UNSURE, (old, new)


def test_every_verdict_gives_a_reason_that_opens_with_its_kind():
    opening = {
        Relation.SAME: "same meaning: ",
        Relation.CONTRADICTS: "contradicts: ",
        Relation.SEPARATE: "separate: ",
        Relation.UNSURE: "unsure: ",
    }
    pairs = [
        ("Logs are kept for 30 days.", "Logs are kept for 90 days."),
        ("Redis: cache only.", "Format Python with Black."),
        ("The user's brother lives in Chicago.", "The user's sister lives in Chicago."),
        ("We keep logs for 30 days.", "Logs are retained for 30 days."),
    ]
    kinds = set()
    for old, new in pairs:
        verdict = _classify(old, new)
        kinds.add(verdict.kind)
        assert verdict.reason.startswith(opening[verdict.kind]), verdict
    assert kinds == set(Relation)


@pytest.mark.slow
@pytest.mark.parametrize("classifier", ["rules_classifier", "pair_model_classifier"])
def test_a_stream_of_distinct_statements_is_neither_merged_nor_superseded(classifier):
    sentences = eval_writes.stream_sentences()
    assert len(sentences) >= 200
    result = eval_writes.stream(sentences, getattr(eval_writes, classifier))
    assert result.hit_rate <= eval_writes.MAX_STREAM_HIT, result.hit
    assert result.unsure_sentences <= 0.1 * len(sentences)


def _scores(pairs):
    return eval_writes.score(pairs, eval_writes.similarities(pairs), eval_writes.new_classifier)


def test_development_pairs_keep_their_rates():
    # what this design measured on all 465 development pairs (authors A and B): a change may
    # only do better; each author apart stays within the targets
    from bench.datasets import dev_pairs

    dev_set = dev_pairs()
    dev = _scores(dev_set)
    assert dev.confusion[("contradicts", "same")] == 0  # of 159
    assert dev.confusion[("same", "contradicts")] == 0  # of 165
    assert dev.confusion[("separate", "contradicts")] == 0  # of 141
    assert dev.unsure <= 0.15  # measured 14.0 %
    for author in ("a", "b"):
        scores = _scores([p for p in dev_set if p.author == author])
        assert scores.meets_targets, author


def _held_out(classifier):
    from bench.datasets import held_out_pairs

    pairs = held_out_pairs()
    return eval_writes.score(pairs, eval_writes.similarities(pairs), classifier)


@pytest.fixture(scope="module")
def held_out_scores():
    # what a default install runs: the rules, then the pair model's second reading
    return _held_out(eval_writes.pair_model_classifier)


def test_held_out_pairs_meet_the_targets(held_out_scores):
    # the 600 pairs of authors HE and HF (issue 34, round 8), scored once on round 7's model and
    # thresholds (0.5 % swallowed, 1.3 % superseded, 11.8 % unsure), then once on round 8's retrained
    # model and thresholds: 0.0 % swallowed, 0.0 % superseded, 17.3 % unsure
    assert held_out_scores.swallowed <= eval_writes.MAX_SWALLOWED
    assert held_out_scores.superseded <= eval_writes.MAX_SUPERSEDED
    assert held_out_scores.unsure <= eval_writes.MAX_UNSURE


def _unsure(scores) -> int:
    return sum(n for (_, kind), n in scores.confusion.items() if kind == "unsure")


def test_held_out_errors_do_not_grow(held_out_scores):
    # what the default measured on the held-out pairs: a change may only do better
    assert held_out_scores.confusion[("contradicts", "same")] == 0  # of 210
    assert held_out_scores.confusion[("same", "contradicts")] == 0  # of 150
    # the rules' own: "X replaces Y" read as an update where the two are different things (HF)
    assert held_out_scores.confusion[("separate", "contradicts")] <= 7  # of 240
    assert _unsure(held_out_scores) <= 104  # of 600
    # contradictions superseded or asked (issue 34 asks ≥ 90 %; measured 38.6 %: HF 70.5 %, the chat
    # turns of HE 6.7 %, most of them further apart in meaning than the relatedness floor)
    caught = (
        held_out_scores.confusion[("contradicts", "contradicts")] + held_out_scores.confusion[("contradicts", "unsure")]
    )
    assert caught >= 81  # of 210
    # restatements merged (issue 34 asks ≥ 70 %; measured 27.3 %)
    assert held_out_scores.confusion[("same", "same")] >= 41  # of 150


def test_held_out_errors_of_the_rules_alone_do_not_grow():
    # the rules alone (ENGRAM_PAIR_MODEL=0) on the same pairs
    scores = _held_out(eval_writes.rules_classifier)
    assert scores.confusion[("contradicts", "same")] == 0  # of 210
    assert scores.confusion[("same", "contradicts")] <= 1  # of 150
    assert scores.confusion[("separate", "contradicts")] <= 7  # of 240
    assert _unsure(scores) <= 100  # of 600
