"""Engram's agent API for Python runtimes — standard library only, no Django.

    from engram_client import EngramClient, EngramError

- `engram_client.client`: EngramClient, one typed method per API call; `.reviews` for
  remember reviews.
- `engram_client.review`: the remember-review helper (submit, get, wait, consume,
  remember_with_review) and ReviewOutcome.
- `engram_client.remember`: the runtime's remember step — decide when to launch the remember
  sub-agent, render its versioned prompt (`prompts/remember_v1.md`), run it, review, note.
- `engram_client.llm`: ChatCompletions, one call to an OpenAI-compatible endpoint.
- `engram_client.memory_agent`: the reference proactive memory-agent loop (SPEC §9).
- `engram_client.deciders`: the memory agent's deciders, rule-based and OpenAI-compatible.
- `engram_client.bank_adapter`: LocalBank, the run calls in-process inside the Engram server.
- `engram_client.transport`: the one HTTP caller all of them use.
- `engram_client.webhooks`: WebhookReceiver, a signed-webhook receiver (`reviews.wait(...,
  receiver=...)` waits through it instead of long-polling).

Every failure is an `EngramError` (status, code, detail, fields, message); `ReviewTimeout`
derives from it.
"""

from engram_client.client import EngramClient
from engram_client.errors import EngramError, ReviewTimeout
from engram_client.llm import ChatCompletions, LLMError
from engram_client.remember import (
    REMEMBER_PROMPT_VERSION,
    RememberResult,
    RememberTurn,
    Turn,
    render_remember_prompt,
    should_remember,
)
from engram_client.review import ReviewClient, ReviewOutcome, final_answer_note
from engram_client.transport import Transport
from engram_client.webhooks import WebhookReceiver

__all__ = [
    "REMEMBER_PROMPT_VERSION",
    "ChatCompletions",
    "EngramClient",
    "EngramError",
    "LLMError",
    "RememberResult",
    "RememberTurn",
    "ReviewClient",
    "ReviewOutcome",
    "ReviewTimeout",
    "Transport",
    "Turn",
    "WebhookReceiver",
    "final_answer_note",
    "render_remember_prompt",
    "should_remember",
]
