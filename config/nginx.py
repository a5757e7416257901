"""nginx's configuration for `make serve-prod`: config/nginx.conf.template filled in from the
settings (body limit, static files, the long-poll's longest wait) and from bin/serve-prod's
arguments (port, run directory).

    python -m config.nginx --port 8000 --serve-dir $ENGRAM_SERVE_DIR

writes SERVE_DIR/nginx.conf, makes the directories nginx and gunicorn's socket need, and prints
the socket's path. Run as root, nginx's workers run as www-data when that user can reach the
static files and SERVE_DIR (else as root, said on stderr); gunicorn's socket sits in a directory
only they (and its owner) may enter, so nothing else on the machine reaches the app around nginx.
The client timeouts are declared here, once; the tests read them too.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

# Seconds. The whole request header must arrive within CLIENT_HEADER_TIMEOUT; a body may pause at
# most CLIENT_BODY_TIMEOUT between two reads (nginx has no bound on a whole body's time, but it
# holds a slow body itself: no gunicorn thread waits for it); an answer may wait SEND_TIMEOUT for
# the client to take the next part; a kept-alive connection may idle KEEPALIVE_TIMEOUT.
CLIENT_HEADER_TIMEOUT = 10
CLIENT_BODY_TIMEOUT = 10
SEND_TIMEOUT = 30
KEEPALIVE_TIMEOUT = 20
# How long nginx waits for gunicorn's answer: longer than the review long-poll's longest wait and
# than gunicorn's own worker timeout (both checked in `render`).
PROXY_READ_TIMEOUT = 75

TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
# A unix socket's path is at most 107 bytes on Linux.
MAX_SOCKET_PATH = 107


def render(*, port: int, socket: str, serve_dir: str, user: str | None) -> str:
    """The configuration text. Raises ValueError for a socket path too long to bind, a long-poll
    that could outlast PROXY_READ_TIMEOUT, or a placeholder left unfilled."""
    from django.conf import settings

    from config.gunicorn_conf import timeout as gunicorn_timeout
    from review.selectors import MAX_WAIT_SECONDS

    if len(socket.encode()) > MAX_SOCKET_PATH:
        raise ValueError(f"The socket path {socket!r} is over {MAX_SOCKET_PATH} bytes: set a shorter ENGRAM_SERVE_DIR.")
    if max(MAX_WAIT_SECONDS, gunicorn_timeout) + 5 >= PROXY_READ_TIMEOUT:
        raise ValueError(
            f"PROXY_READ_TIMEOUT ({PROXY_READ_TIMEOUT} s) must outlast a {MAX_WAIT_SECONDS} s long-poll "
            f"and gunicorn's {gunicorn_timeout} s timeout."
        )
    if user is not None and not re.fullmatch(r"[a-z_][a-z0-9_-]*", user):
        raise ValueError(f"{user!r} is not a user name.")
    values = {
        "USER": f"user {user};" if user else "# (nginx's workers run as the user who started it)",
        "PORT": str(port),
        "SOCKET": socket,
        "SERVE_DIR": serve_dir,
        "STATIC_ROOT": str(Path(settings.STATIC_ROOT).resolve()),
        "STATIC_MAX_AGE": str(getattr(settings, "WHITENOISE_MAX_AGE", 60)),
        "MAX_BODY_BYTES": str(settings.ENGRAM_MAX_BODY_BYTES),
        "MAX_WAIT_SECONDS": str(MAX_WAIT_SECONDS),
        "GUNICORN_TIMEOUT": str(gunicorn_timeout),
        "PROXY_READ_TIMEOUT": str(PROXY_READ_TIMEOUT),
        "CLIENT_HEADER_TIMEOUT": str(CLIENT_HEADER_TIMEOUT),
        "CLIENT_BODY_TIMEOUT": str(CLIENT_BODY_TIMEOUT),
        "SEND_TIMEOUT": str(SEND_TIMEOUT),
        "KEEPALIVE_TIMEOUT": str(KEEPALIVE_TIMEOUT),
    }
    for name in ("SOCKET", "SERVE_DIR", "STATIC_ROOT"):
        if re.search(r"[\s;{}'\"$#\\]", values[name]):
            raise ValueError(f"The path {values[name]!r} holds a character nginx's configuration would misread.")

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ValueError(f"{TEMPLATE.name} names @{match.group(1)}@, which nothing fills in.")
        return values[match.group(1)]

    return re.sub(r"@([A-Z_]+)@", fill, TEMPLATE.read_text())


WORKER_USER = "www-data"


def _can_reach(user: pwd.struct_passwd, paths: list[Path]) -> bool:
    """Whether `user` may read and enter every one of `paths` (their parents included)."""
    probe = 'for p; do [ -r "$p" ] && [ -x "$p" ] || exit 1; done'
    try:
        result = subprocess.run(  # noqa: S603 — a fixed shell probe; the paths are arguments
            ["/bin/sh", "-c", probe, "sh", *map(str, paths)],
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def prepare(*, port: int, serve_dir: Path) -> Path:
    """Write serve_dir/nginx.conf and make the directories it names; the socket's path."""
    from django.conf import settings

    serve_dir = serve_dir.resolve()
    (serve_dir / "nginx").mkdir(parents=True, exist_ok=True)
    serve_dir.chmod(0o755)
    socket_dir = serve_dir / "sock"
    socket_dir.mkdir(exist_ok=True)
    user: str | None = None
    group = -1
    if os.geteuid() == 0:
        try:
            worker = pwd.getpwnam(WORKER_USER)
        except KeyError:
            worker = None
        if worker is not None and _can_reach(worker, [Path(settings.STATIC_ROOT), serve_dir]):
            user, group = worker.pw_name, worker.pw_gid
        else:
            user = "root"
            print(
                f"==> nginx's workers run as root: {WORKER_USER} cannot reach {settings.STATIC_ROOT} and {serve_dir}",
                file=sys.stderr,
            )
    os.chown(socket_dir, -1, group if group != -1 else os.getegid())
    socket_dir.chmod(0o750 if group != -1 else 0o700)
    socket = socket_dir / "web.sock"
    config = render(port=port, socket=str(socket), serve_dir=str(serve_dir), user=user)
    (serve_dir / "nginx.conf").write_text(config)
    return socket


def main() -> None:
    parser = argparse.ArgumentParser(description="Write nginx's configuration for bin/serve-prod.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--serve-dir", type=Path, required=True)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    try:
        print(prepare(port=args.port, serve_dir=args.serve_dir))
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


if __name__ == "__main__":
    main()
