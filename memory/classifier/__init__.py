"""The write classifier (issue 14): whether a proposed fact restates, contradicts or is separate
from a live one — or whether a person must decide.

Embedding cosine alone cannot tell "deploys happen on Tuesdays" from "… on Fridays": MiniLM puts
minimal-edit contradictions as close as paraphrases (0.85–0.98 on our labelled pairs). So the rules
read both texts — quantities in canonical units, negation, names, the order of steps — and answer
SAME, CONTRADICTS, SEPARATE or UNSURE with a reason a reviewer can read, SAME and CONTRADICTS only
on strong evidence; then a pair model may revise them (the second reading). `make eval-writes`
measures it on labelled pairs.

Pure Python, no Django, and only the names below are imported from outside: the modules are the
package's own (the contracts in .importlinter and tests/test_architecture.py hold it to both):
  vocabulary      the words it knows, read once from memory/classifier/data/
  quantities      "60 s" = "one minute", "twice a day" = "every 12 hours"
  reading         a text read once (cached) into tokens, polarity, bounds, steps; the reading budget
  verdict         two readings compared, and the verdict (SAME_COSINE, SEPARATE_COSINE…)
  model_reading   second_reading: the pair model's probabilities revising the verdicts (its
                  thresholds ship in the model's card, memory/data/pair_model.json); classify_many,
                  what the write path runs
The pair model itself is memory/pair_model.py: callers pass `model=pair_model.active()`.
"""

from memory.classifier.model_reading import (
    MODEL_READS,
    NEVER,
    SECOND_READING,
    PairProbabilities,
    SecondReading,
    asks_model,
    classify_many,
    second_reading,
    shipped_thresholds,
)
from memory.classifier.reading import (
    COMPARE_STEPS,
    NEAREST_FACTS,
    READ_CHARS,
    Budget,
    announces_update,
    forget_readings,
    normalise,
    read,
)
from memory.classifier.verdict import (
    RELATED_COSINE,
    SEPARATE_COSINE,
    Relation,
    Verdict,
    classify,
    classify_bounded,
)

__all__ = [
    "COMPARE_STEPS",
    "MODEL_READS",
    "NEAREST_FACTS",
    "NEVER",
    "READ_CHARS",
    "RELATED_COSINE",
    "SECOND_READING",
    "SEPARATE_COSINE",
    "Budget",
    "PairProbabilities",
    "Relation",
    "SecondReading",
    "Verdict",
    "announces_update",
    "asks_model",
    "classify",
    "classify_bounded",
    "classify_many",
    "forget_readings",
    "normalise",
    "read",
    "second_reading",
    "shipped_thresholds",
]
