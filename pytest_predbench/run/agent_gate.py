"""The preflight's agent gate: an installed agent (opencode) is checked in its session's own sandbox.

A mini-swe-agent session's model calls are made in the harness process, so the model gate's probe
(run/preflight.py) covers its whole path. An installed agent's calls are not: it runs inside the
sandbox and reaches its model through the forwarder and the metered endpoint (session/endpoint.py).
So, for each such agent of a run, before any item runs, one sandbox built exactly as its sessions
build it (opencode.agent_sandbox) runs one command that shows:

    version   the installed binary, run there as the agent runs (its environment, its first shell),
              reports the pinned version (a binary missing from the cache is installed first, with
              the notice of session/opencode_install.py)
    endpoint  one small chat request from inside the sandbox, through the forwarder on the sandbox's
              loopback and the socket bound in, is answered by the endpoint, the nonce it sent
              arriving and the nonce answered coming back
    keys      no value of a key the harness holds (SECRET_NAME variables of the harness's environment,
              the api_key of a run's model in the model settings) is in the agent's environment
              there, nor in any file of the directories the agent can write or the tools bound in

The endpoint's request is answered by the harness itself (`Answer`), never forwarded to a provider:
it costs nothing and is booked nowhere; the model gate probes the model's own path. A failure is one
line naming the agent and what was expected and found; a key is named by its variable, never shown.
"""

import os
import secrets
import shlex
import tempfile
from pathlib import Path

from pytest_predbench.session.bwrap import SCRATCH_DIR, TOOLS_DIR
from pytest_predbench.session.endpoint import Refused
from pytest_predbench.session.model_settings import SECRET_NAME
from pytest_predbench.session.protocol import SessionLimits, first_line
from pytest_predbench.verify.environment import EnvRecord

MIN_KEY_CHARS = 8
"""A shorter value (`1`, `true`) is no key, and would be found everywhere by chance."""
SCAN_BYTES = 16 * 1024 * 1024
"""The most read of the sandbox's files (its directories hold a config, a task and a log)."""
VIEW = ".preflight-env"
"""The agent's environment as seen in the sandbox, written into the agent's directory."""
SECONDS = 120.0
PROBE = (
    "import json,sys,urllib.request\n"
    "port,nonce=sys.argv[1],sys.argv[2]\n"
    "body=json.dumps({'stream':True,'messages':[{'role':'user','content':nonce}]}).encode()\n"
    "request=urllib.request.Request(f'http://127.0.0.1:{port}/v1/chat/completions',body,"
    "{'Content-Type':'application/json'})\n"
    "try:\n"
    "    reply=urllib.request.urlopen(request,timeout=20).read(65536).decode('utf-8','replace')\n"
    "except Exception as exc:\n"
    "    reply=f'{type(exc).__name__}: {exc}'\n"
    "print('endpoint', ' '.join(reply.split())[:300])\n"
)
"""The sandbox's side of the endpoint check, on its system python3 (as the forwarder)."""


class Answer:
    """The endpoint's handler during the check: the request must carry `asked`; it is answered with
    `answer` by the harness itself (no provider, no cost, nothing booked)."""

    def __init__(self, asked: str, answer: str):
        self.asked, self.answer = asked, answer
        self.calls = 0

    def __call__(self, body: dict) -> dict:
        self.calls += 1
        said = [m.get("content") for m in body["messages"] if isinstance(m, dict)]
        if self.asked not in said:
            raise Refused("predbench preflight: not the preflight's request")
        message = {"role": "assistant", "content": self.answer}
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return {"id": "preflight", "created": 0, "model": "preflight", "choices": [choice], "usage": usage}


def held_keys(settings: dict | None = None, models: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """What key the harness holds, by where it holds it: its environment's SECRET_NAME variables, and
    the api_key given for a run's model in the model settings (`settings`: model_settings.load_settings)."""
    keys = {name: value for name, value in os.environ.items() if SECRET_NAME.search(name)}
    for model in models:
        given = getattr((settings or {}).get(model), "extra_kwargs", {}).get("api_key")
        if isinstance(given, str):
            keys[f"the api_key of {model} in the model settings"] = given
    return {name: value for name, value in keys.items() if len(value) >= MIN_KEY_CHARS}


def _files(roots: list[Path]) -> list[Path]:
    found = []
    for root in roots:
        for folder, _, names in os.walk(root):
            found += [Path(folder) / name for name in sorted(names) if (Path(folder) / name).is_file()]
    return sorted(found)


def visible_keys(keys: dict[str, str], environment: bytes, roots: dict[str, Path]) -> list[str]:
    """Where each held key shows: in the agent's `environment` (NUL-separated, as `env -0`) or in a
    file under `roots` (inside path -> host path), named by the variable and the place."""
    shown: list[str] = []
    variables = dict(line.partition(b"=")[::2] for line in environment.split(b"\0") if line)
    budget = SCAN_BYTES
    contents: list[tuple[str, bytes]] = []
    for inside, host in roots.items():
        for path in _files([host]):
            if budget <= 0:
                break
            with path.open("rb") as f:
                data = f.read(budget)
            budget -= len(data)
            contents.append((f"{inside}/{path.relative_to(host)}", data))
    for name, value in sorted(keys.items()):
        needle = value.encode()
        hits = [f"its environment as {var.decode(errors='replace')}" for var, v in variables.items() if needle in v]
        hits += [f"{inside}" for inside, data in contents if needle in data]
        if hits:
            shown.append(f"the value of {name} is visible inside the sandbox: in {', '.join(hits[:3])}")
    return shown


def check_command(port: int, nonce: str) -> str:
    """The sandbox's one command: the version, the agent's environment (into VIEW), then the
    forwarder and one request through it. Each step runs whatever the one before did."""
    from pytest_predbench.session import opencode

    return (
        f"printf 'version %s\\n' \"$({opencode.as_agent(opencode.BINARY + ' --version')} 2>&1 | head -c 300 | "
        "tr '\\n' ' ')\"; "
        f"{opencode.as_agent('env -0')} > {opencode.AGENT_DIR}/{VIEW}; "
        f"{opencode.START_FORWARDER} && python3 -c {shlex.quote(PROBE)} {port} {shlex.quote(nonce)}"
    )


def _masked(text: str, keys: dict[str, str]) -> str:
    for value in keys.values():
        text = text.replace(value, "<key>")
    return text


def opencode_check(
    record: EnvRecord, limits: SessionLimits, keys: dict[str, str], version: str | None = None
) -> tuple[list[str], str]:
    """The problems found for opencode (one line each, empty when none) and what was found."""
    from pytest_predbench.session import opencode, opencode_install
    from pytest_predbench.session.sandbox import SandboxError

    pinned = version or opencode_install.VERSION
    try:
        binary = opencode_install.ensure()
    except opencode_install.OpenCodeInstallError as exc:
        return [f"expected version {pinned}, found none installed: {first_line(exc)}"], ""
    asked, answer = f"preflight-{secrets.token_hex(8)}", f"predbench-{secrets.token_hex(8)}"
    handler = Answer(asked, answer)
    with tempfile.TemporaryDirectory(prefix="predbench-preflight-agent-") as tmp:
        try:
            built = opencode.agent_sandbox(
                pred_path=Path(record.pred_path),
                extractor_path=Path(record.extractor_path) if record.extractor_path else None,
                source_dir=Path(record.source_dir),
                state_dir=Path(tmp),
                limits=limits,
                binary=binary,
                handler=handler,
            )
        except (SandboxError, OSError) as exc:
            return [f"its sandbox does not start: {first_line(exc)}"], ""
        try:
            ran = built.sandbox.run(check_command(opencode.PORT, asked), timeout=SECONDS, shell=opencode.AGENT_SHELL)
            view = built.agent_dir / VIEW
            environment = view.read_bytes() if view.is_file() else b""
            view.unlink(missing_ok=True)
            sandbox = built.sandbox
            roots = {SCRATCH_DIR: sandbox.scratch, TOOLS_DIR: sandbox.tools_dir, **sandbox.writable}
            shown = visible_keys(keys, environment, roots)
        except (SandboxError, OSError) as exc:
            return [f"the check did not run in its sandbox: {first_line(exc)}"], ""
        finally:
            built.close()
    lines = {word: rest.strip() for word, _, rest in (line.partition(" ") for line in ran.output.splitlines())}
    problems = []
    found = lines.get("version", "")
    if found != pinned:
        said = _masked(found, keys)[:200] or f"no output (exit {ran.returncode})"
        problems.append(f"expected version {pinned}, found {said} (`{opencode.BINARY} --version` inside the sandbox)")
    if not environment:
        problems.append("the agent's environment inside the sandbox could not be read")
    reply = lines.get("endpoint")
    if reply is None or answer not in reply or handler.calls != 1:
        said = reply if reply is not None else " | ".join(ran.output.strip().splitlines()[1:])
        said = _masked(said, keys)[:200] or f"no answer (exit {ran.returncode})"
        problems.append(
            f"the metered endpoint is not reachable from inside the sandbox (127.0.0.1:{opencode.PORT}, through "
            f"the forwarder to the socket bound in): {said}"
        )
    problems += shown
    detail = (
        f"opencode {found} (pinned {pinned}) runs in its session sandbox; a request from inside reached the "
        f"metered endpoint through the forwarder and was answered by the harness (no provider call); "
        f"none of the {len(keys)} key(s) the harness holds is in the agent's environment or files there"
    )
    return problems, detail
