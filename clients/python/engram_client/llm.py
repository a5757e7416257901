"""One call to an OpenAI-compatible `/chat/completions` endpoint, with clear errors.

    chat = ChatCompletions("http://127.0.0.1:11434/v1", model="qwen2.5:7b")
    text = chat("Nominate the files worth remembering …")

The HTTP goes through engram_client's Transport (the package's one HTTP caller); this module
only shapes the request and checks the reply. Every failure is an LLMError (an EngramError):
`llm_unreachable` and `llm_timeout` (status 0), `llm_bad_reply` (a 2xx that is not a chat
completion with text), or the server's own code and status for a non-2xx answer.
"""

from __future__ import annotations

import os
import urllib.error
from collections.abc import Mapping, Sequence
from typing import Any

from engram_client.errors import EngramError
from engram_client.transport import Transport

__all__ = ["ChatCompletions", "LLMError"]


class LLMError(EngramError):
    """The chat endpoint failed: unreachable, too slow, an error answer, or a reply with no text."""


def _timed_out(exc: BaseException | None) -> bool:
    """Whether a connection failure was a timeout (urllib wraps some in URLError)."""
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else None
    return isinstance(exc, TimeoutError)


def reply_text(payload: Any) -> str:
    """`choices[0].message.content` of a chat completion; LLMError when there is none."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        content = None
    if not isinstance(content, str) or not content.strip():
        raise LLMError(0, "llm_bad_reply", "The chat endpoint's answer has no choices[0].message.content text.")
    return content


class ChatCompletions:
    """A callable `prompt -> reply text` over an OpenAI-compatible endpoint.

    `base_url` is the API root (…/v1), `model` the model name, `api_key` sent as a bearer token
    when set. Arguments left out come from the environment: `{env_prefix}_URL`, `_MODEL`,
    `_KEY`. There is no default URL: nothing is sent anywhere unless configured. `retries`
    applies to 429/503 only (a POST is never re-sent after a lost connection)."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        env_prefix: str = "ENGRAM_REMEMBER_LLM",
        timeout: float = 120.0,
        temperature: float = 0.0,
        retries: int = 2,
    ) -> None:
        url = base_url or os.environ.get(f"{env_prefix}_URL") or ""
        if not url:
            raise ValueError(f"Set {env_prefix}_URL (or pass base_url=) to use an OpenAI-compatible endpoint.")
        self.model = model or os.environ.get(f"{env_prefix}_MODEL") or ""
        if not self.model:
            raise ValueError(f"Set {env_prefix}_MODEL (or pass model=) for the OpenAI-compatible endpoint.")
        if timeout <= 0:
            raise ValueError("timeout must be positive.")
        key = api_key if api_key is not None else os.environ.get(f"{env_prefix}_KEY", "")
        self.temperature = temperature
        self.transport = Transport(url, key, timeout=timeout, retries=retries)  # ValueError unless http(s)
        self.base_url = self.transport.base.rstrip("/")

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """POST chat/completions with `messages`; the reply's text."""
        body = {"model": self.model, "messages": [dict(m) for m in messages], "temperature": self.temperature}
        try:
            payload = self.transport.request("POST", "chat/completions", body)
        except EngramError as exc:
            if exc.status:
                raise LLMError(exc.status, exc.code, exc.detail or "the chat endpoint refused the call") from exc
            if _timed_out(exc.__cause__):
                raise LLMError(0, "llm_timeout", f"{self.base_url} did not answer within the timeout.") from exc
            raise LLMError(0, "llm_unreachable", exc.detail) from exc
        except (ValueError, TypeError) as exc:  # a 2xx whose body is not a JSON object
            raise LLMError(0, "llm_bad_reply", f"{self.base_url} answered with something other than JSON.") from exc
        return reply_text(payload)

    def __call__(self, prompt: str) -> str:
        """The reply to `prompt` sent as one user message."""
        return self.complete([{"role": "user", "content": prompt}])
