"""The client SDK as a package: standard library only (no Django), one error class, one HTTP
transport, and installable with pip from the repository."""

import inspect
import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import engram_client
from engram_client import EngramError
from engram_client.memory_agent import MemoryView, OpenAICompatibleDecider

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "clients" / "python"
MODULES = [
    "client",
    "errors",
    "review",
    "transport",
    "memory_agent",
    "deciders",
    "bank_adapter",
    "llm",
    "remember",
    "webhooks",
]


def test_the_package_imports_with_the_standard_library_alone_and_never_loads_django():
    # -I -S: no site-packages at all, so any third-party import (Django included) would fail.
    script = (
        f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r})\n"
        f"import engram_client\n"
        f"for name in {MODULES!r}: __import__('engram_client.' + name)\n"
        "assert 'remember.v1' in engram_client.remember.REMEMBER_PROMPT\n"
        "loaded = [m for m in sys.modules if m == 'django' or m.startswith(('django.', 'agents', 'memory', 'review'))]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_every_exception_of_the_package_is_an_engram_error():
    exceptions = []
    for name in MODULES:
        module = __import__(f"engram_client.{name}", fromlist=["_"])
        exceptions += [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("engram_client")
        ]
    assert exceptions and all(issubclass(e, EngramError) for e in exceptions)
    timeout = engram_client.ReviewTimeout(7, "http://x/review/remember/7/")
    assert (timeout.status, timeout.code) == (0, "review_timeout")
    assert (
        timeout.message
        == str(timeout)
        == "0 review_timeout: Remember review 7 is still pending: http://x/review/remember/7/"
    )


class FakeChat:
    """An OpenAI-compatible /chat/completions that answers from a script and records requests."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                fake.requests.append((self.path, self.headers.get("Authorization"), json.loads(body)))
                status, payload = fake.answers.pop(0)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_chat():
    servers = []

    def make(*answers):
        servers.append(FakeChat(*answers))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_the_openai_compatible_decider_calls_through_the_transport(fake_chat):
    # Two phases, two calls: the bank operations, then the decision on the updated bank.
    updates = {"choices": [{"message": {"content": '{"updates": []}'}}]}
    reply = {"choices": [{"message": {"content": '{"reminder": "`make test` failed at step 3.", "updates": []}'}}]}
    refused = {"error": {"code": "model_not_found", "message": "no such model"}}
    chat = fake_chat((200, updates), (200, reply), (404, refused))
    decider = OpenAICompatibleDecider(chat.url, "sk-test", "small-model")
    view = MemoryView(task="Fix CI", step=4, window=[], bank={}, proposed={"command": "make test"})
    assert decider(view).reminder == "`make test` failed at step 3."
    path, auth, body = chat.requests[0]
    assert (path, auth, body["model"]) == ("/v1/chat/completions", "Bearer sk-test", "small-model")
    with pytest.raises(EngramError) as exc:
        decider(view)
    assert (exc.value.status, exc.value.code, exc.value.detail) == (404, "model_not_found", "no such model")


@pytest.mark.slow
def test_pip_installs_the_typed_package_from_the_repository(tmp_path):
    source, target = tmp_path / "source", tmp_path / "site"
    # A copy: setuptools writes build/ and *.egg-info next to the sources it builds.
    shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    installed = target / "engram_client"
    assert {p.name for p in installed.glob("*.py")} >= {f"{name}.py" for name in MODULES}
    assert (installed / "py.typed").exists()
    # The remember prompt ships as package data and loads from the installed copy.
    assert (installed / "prompts" / "remember_v1.md").read_text() == engram_client.remember.REMEMBER_PROMPT
    script = "import engram_client.remember as r, sys; sys.stdout.write(r.__file__ + '\\n' + r.REMEMBER_PROMPT)"
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {script}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded_from, prompt = result.stdout.split("\n", 1)
    assert loaded_from.startswith(str(target)) and prompt == engram_client.remember.REMEMBER_PROMPT
