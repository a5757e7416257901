"""Engram's agent API for Python runtimes — standard library only, no Django.

    from engram_client import EngramClient, EngramError

- `engram_client.client`: EngramClient, one typed method per API call; `.reviews` for
  remember reviews.
- `engram_client.review`: the remember-review helper (submit, get, wait, consume,
  remember_with_review) and ReviewOutcome.
- `engram_client.memory_agent`: the reference proactive memory-agent loop (SPEC §9).
- `engram_client.bank_adapter`: LocalBank, the run calls in-process inside the Engram server.
- `engram_client.transport`: the one HTTP caller all of them use.

Every failure is an `EngramError` (status, code, detail, fields, message); `ReviewTimeout`
derives from it.
"""

from engram_client.client import EngramClient
from engram_client.errors import EngramError, ReviewTimeout
from engram_client.review import ReviewClient, ReviewOutcome, final_answer_note
from engram_client.transport import Transport

__all__ = [
    "EngramClient",
    "EngramError",
    "ReviewClient",
    "ReviewOutcome",
    "ReviewTimeout",
    "Transport",
    "final_answer_note",
]
