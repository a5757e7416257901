"""Remember a turn against a running Engram (`make run`), end to end.

    # A local fake OpenAI-compatible endpoint (nothing leaves this machine):
    .venv/bin/python clients/python/examples/remember_turn.py --fake

    # A real endpoint (any OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp, …):
    export ENGRAM_REMEMBER_LLM_URL=http://127.0.0.1:11434/v1 ENGRAM_REMEMBER_LLM_MODEL=qwen2.5:7b
    export ENGRAM_REMEMBER_LLM_KEY=…          # if the endpoint wants one
    .venv/bin/python clients/python/examples/remember_turn.py

The script pretends an agent turn just wrote two files into a temporary working directory,
lets RememberTurn decide (forced: there are artifacts), runs the remember sub-agent, and
submits its output as a review. Open the printed review URL (sign in as admin / engram-demo),
approve or reject, and the script prints the note a runtime would fold into its final answer.
ENGRAM_URL (default http://127.0.0.1:8000) and ENGRAM_AGENT_KEY (default: the demo agent's
key in .engram/demo-agent-key) say which Engram and which agent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from engram_client import ChatCompletions, EngramClient, RememberTurn, Turn

FILES = {
    "docs/ingest.md": "# Ingest\n\nUploads are parsed by the Celery worker `ingest`; the API only enqueues.\n",
    "notes/scratch.txt": "tried three regexes, none needed\n",
}
CANNED = (
    "```json\n"
    + json.dumps(
        {
            "recommendations": [
                {
                    "path": "docs/ingest.md",
                    "recommended_layer": "project/context",
                    "rationale": "Where uploads are parsed: every ingest change in this repo needs it.",
                    "suggested_memory_content": "Uploads are parsed by the Celery worker `ingest`; the API only enqueues.",
                }
            ]
        },
        indent=2,
    )
    + "\n```\n\nNominated the ingest doc; the scratch notes are not worth keeping."
)


def fake_endpoint() -> tuple[ThreadingHTTPServer, str]:
    """A local OpenAI-compatible /v1/chat/completions that always answers CANNED."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"choices": [{"message": {"role": "assistant", "content": CANNED}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fake", action="store_true", help="use a local fake OpenAI-compatible endpoint")
    parser.add_argument("--repo", default="web-app", help="the Engram repo slug (demo: web-app)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a person")
    args = parser.parse_args()

    key = os.environ.get("ENGRAM_AGENT_KEY") or Path(".engram/demo-agent-key").read_text().strip()
    site = os.environ.get("ENGRAM_URL", "http://127.0.0.1:8000").rstrip("/")
    engram = EngramClient(site, key)
    if args.fake:
        _, url = fake_endpoint()
        llm = ChatCompletions(url, model="fake-remember")
    else:
        llm = ChatCompletions()  # ENGRAM_REMEMBER_LLM_URL / _MODEL / _KEY
    helper = RememberTurn(engram, llm=llm, timeout=args.timeout)

    with tempfile.TemporaryDirectory() as workdir:
        for path, text in FILES.items():
            (Path(workdir) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(workdir) / path).write_text(text)
        turn = Turn(
            session_id=f"example-{os.getpid()}",
            task="Document where uploads are parsed",
            summary="Wrote docs/ingest.md; left a scratch file from an abandoned approach.",
            artifacts=list(FILES),
            workdir=workdir,
            repo=args.repo,
        )
        print(helper.should_remember(turn).reason, flush=True)
        result = helper.remember(
            turn,
            on_submitted=lambda review: print(
                "Review it at",
                (site if review["review_url"].startswith("/") else "") + review["review_url"],
                flush=True,
            ),
        )
    print(f"status: {result.status}")
    print(result.note or "(no review, nothing to add to the answer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
