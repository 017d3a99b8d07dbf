"""No secret in anything `noctaya-fetch` prints, writes as its termination message (which the
operator copies into the service's status) or logs, whatever characters the secret holds and
whichever variable it came in: the real command against the fake hub.

A token the hub could never accept (two tokens of a rotation, a line break, an escape sequence,
a Unicode line separator, a space, a NUL, far too long) is refused before it is used, as a
permanent configuration error naming the variable or the file, never the value; a hub endpoint
with a password is refused the same way; and every log record, the hub clients' included, is
redacted when it is made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .fake_hub import Hub
from .test_cli import COMMAND, hub_env

FIRST = "hf_first_secret_of_the_rotation"
SECOND = "hf_second_secret_of_the_rotation"
HUBS = {"HF_TOKEN": "hf://acme/tiny-model", "MODELSCOPE_API_TOKEN": "modelscope://acme/tiny-model"}
NOT_ONE_TOKEN = (
    "is not one token: it holds a line break, a space, a control or a non-ASCII character (two "
    "tokens of a rotation?); set it to the one token the hub issued"
)
SHAPES = {
    "two-lines": f"{FIRST}\n{SECOND}",
    "carriage-return": f"{FIRST}\r{SECOND}",
    "escape-sequence": f"{FIRST}\x1b[2K\x1b[1A{SECOND}",
    "line-separator": f"{FIRST}\u2028{SECOND}",
    "space": f"{FIRST} {SECOND}",
    "tab": f"{FIRST}\t{SECOND}",
}


def fetch(
    hub: Hub, uri: str, tmp_path: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """The command's result and its termination message."""
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    result = subprocess.run(
        [
            COMMAND,
            uri,
            "--cache",
            str(tmp_path / "cache"),
            "--attempts",
            "2",
            "--termination-log",
            str(termination_log),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **hub_env(hub), **env},
        timeout=120,
    )
    return result, termination_log.read_text()


def assert_nowhere(
    secrets: list[str], result: subprocess.CompletedProcess[str], message: str
) -> None:
    for secret in secrets:
        for output in (result.stdout, result.stderr, message):
            assert secret not in output


@pytest.mark.parametrize("variable", HUBS)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_token_that_is_not_one_token_is_refused_naming_the_variable(
    hub: Hub, tmp_path: Path, variable: str, shape: str
) -> None:
    hub.token = FIRST
    uri = HUBS[variable]

    result, message = fetch(hub, uri, tmp_path, {variable: SHAPES[shape]})

    assert result.returncode == 2, result.stderr
    line = f"noctaya-fetch: {uri}: {variable} {NOT_ONE_TOKEN}"
    assert result.stderr.strip().splitlines()[-1] == line
    assert message == line
    assert hub.requests == []
    assert_nowhere([FIRST, SECOND], result, message)


@pytest.mark.parametrize("variable", HUBS)
@pytest.mark.parametrize("shape", [*SHAPES, "nul", "utf-8-garbage"])
def test_a_token_file_that_is_not_one_token_is_refused_naming_the_file(
    hub: Hub, tmp_path: Path, variable: str, shape: str
) -> None:
    """A Secret's key is bytes: a NUL or invalid UTF-8 are possible there, not in a variable."""
    hub.token = FIRST
    uri = HUBS[variable]
    content = {"nul": f"{FIRST}\0{SECOND}", "utf-8-garbage": f"{FIRST}\udcff{SECOND}"}
    token_file = tmp_path / "token"
    token_file.write_bytes(
        content.get(shape, SHAPES.get(shape, "")).encode("utf-8", "surrogateescape") + b"\n"
    )

    result, message = fetch(hub, uri, tmp_path, {f"{variable}_FILE": str(token_file)})

    assert result.returncode == 2, result.stderr
    line = f"noctaya-fetch: {uri}: {variable}_FILE ({token_file}) {NOT_ONE_TOKEN}"
    assert result.stderr.strip().splitlines()[-1] == line
    assert message == line
    assert_nowhere([FIRST, SECOND], result, message)


@pytest.mark.parametrize("variable", HUBS)
def test_a_token_longer_than_any_hub_issues_is_refused_before_it_is_sent(
    hub: Hub, tmp_path: Path, variable: str
) -> None:
    """Sent, it is refused by the server's header limit or the connection is dropped: a
    failure a retry can never fix, taken for a network failure."""
    uri = HUBS[variable]
    token = FIRST + "x" * 100_000

    result, message = fetch(hub, uri, tmp_path, {variable: token})

    assert result.returncode == 2, result.stderr
    line = (
        f"noctaya-fetch: {uri}: {variable} holds more than 4096 characters, which no hub token has"
    )
    assert message == line
    assert hub.requests == []
    assert_nowhere([FIRST], result, message)


def test_a_token_file_that_is_a_fifo_is_refused_without_waiting_for_a_writer(
    hub: Hub, tmp_path: Path
) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)

    result, message = fetch(hub, HUBS["HF_TOKEN"], tmp_path, {"HF_TOKEN_FILE": str(fifo)})

    assert result.returncode == 2, result.stderr
    assert message == (
        f"noctaya-fetch: hf://acme/tiny-model: HF_TOKEN_FILE: cannot read {fifo}: a FIFO, not a "
        "regular file"
    )


@pytest.mark.parametrize(
    ("variable", "uri"),
    [
        ("HF_ENDPOINT", "hf://acme/tiny-model"),
        ("MODELSCOPE_ENDPOINT", "modelscope://acme/tiny-model"),
    ],
)
def test_an_endpoint_with_a_password_is_refused_and_the_password_printed_nowhere(
    hub: Hub, tmp_path: Path, variable: str, uri: str
) -> None:
    """The hub client logs the URL of every request it retries, userinfo included."""
    endpoint = "http://mirror:endpoint-password@127.0.0.1:9"

    result, message = fetch(hub, uri, tmp_path, {variable: endpoint})

    assert result.returncode == 2, result.stderr
    assert message == (
        f"noctaya-fetch: {variable}: holds credentials (an @ in the URL); give the hub's URL "
        "without them, and a token in the token variable"
    )
    assert_nowhere(["endpoint-password"], result, message)


@pytest.mark.parametrize(
    "uri",
    [
        f"hf://{FIRST}@acme/tiny-model",
        f"hf://acme/tiny-model@{FIRST}",
        f"modelscope://user:{FIRST}@acme/tiny-model",
        f"oci://user:{FIRST}@registry.example/models/tiny@sha256:{'a' * 64}",
    ],
)
def test_a_model_uri_with_credentials_is_refused_and_printed_nowhere(
    hub: Hub, tmp_path: Path, uri: str
) -> None:
    """Every line names the URI it was given; which part of it is the secret cannot be told,
    so the whole URI is hidden."""
    result, message = fetch(hub, uri, tmp_path, {})

    assert result.returncode == 2, result.stderr
    assert message == (
        "noctaya-fetch: [redacted]: model.source.uri must not contain credentials "
        "(user:password@ or token@, or any @ in an hf:// or modelscope:// URI); the Secret that "
        "secretRef names holds them"
    )
    assert_nowhere([FIRST], result, message)


def test_a_hostile_uri_cannot_add_a_line_to_the_termination_message(
    hub: Hub, tmp_path: Path
) -> None:
    """The status carries one line: a URI with a line break or an escape sequence in it (the
    fetcher quotes the URI it was given) is escaped, not printed raw."""
    uri = "hf://acme/x\nnoctaya-fetch: hf://acme/x: fetched 1 B\x1b[2K"

    result, message = fetch(hub, uri, tmp_path, {})

    assert result.returncode == 2, result.stderr
    assert "\n" not in message
    assert "\x1b" not in message
    assert message.startswith(
        "noctaya-fetch: hf://acme/x\\nnoctaya-fetch: hf://acme/x: fetched 1 B\\x1b[2K: "
    )


def test_every_log_record_is_redacted_the_hub_clients_own_handlers_included(
    tmp_path: Path,
) -> None:
    """Defence in depth behind the refusals: a client that logs a URL with a password, or a
    token the fetcher holds, through its own handler, and a warning, all print redacted."""
    code = f"""
        import logging, os, warnings
        from noctaya.fetch import cli
        from noctaya.fetch.credentials import hub_token
        os.environ["HF_TOKEN"] = {FIRST!r}
        cli._configure_logging()
        hub_token("HF_TOKEN", "hf://acme/tiny-model")
        from huggingface_hub.utils import logging as hub_logging
        client = hub_logging.get_logger("huggingface_hub.utils._http")
        client.warning("'%s' thrown while requesting GET %s", "reset",
                       "http://mirror:log-password@hub.example/api")
        client.warning("sent Authorization: Bearer %s", {FIRST!r})
        logging.getLogger("urllib3").warning("proxy http://p:proxy-password@proxy:3128 failed")
        warnings.warn("see https://u:warning-password@example.com/")
        try:
            raise ValueError("header " + {FIRST!r})
        except ValueError:
            logging.getLogger("modelscope").exception("failed")
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert "thrown while requesting GET http://[redacted]@hub.example/api" in result.stderr
    assert "ValueError: header [redacted]" in result.stderr
    for secret in (FIRST, "log-password", "proxy-password", "warning-password"):
        assert secret not in result.stderr
