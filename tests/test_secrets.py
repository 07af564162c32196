"""Secrets stay secret: the anaconda.org token is stripped, checked and masked in every form, in every
output, log line, exception and file, whatever the server does (tests/support/anaconda_server.py: 401, 404, 500,
or no server at all). The CLI runs as a subprocess, exactly as CI runs it.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.anaconda_server import FakeAnaconda
from test_channels import api_doc, by_name, copy_channel, staging_files, write_distro
from test_promote import write_results

from conda_distro.channels import AnacondaChannel, open_channel
from conda_distro.config import load_config
from conda_distro.errors import ChannelError
from conda_distro.util.secret import (
    MASK,
    MIN_SECRET_LENGTH,
    Secret,
    mask,
    masked_excepthook,
    read_secret,
    register,
    scrubbed_env,
)

TOKEN = "tok-S3CRET-token-4242424242"  # what the server accepts


def leaked_forms(token: str) -> list[str]:
    """The forms a token could leak in, written out here independently of conda_distro.util.secret."""
    t = token.strip()
    forms = {token, t, repr(token)[1:-1], repr(t)[1:-1], json.dumps(token)[1:-1], quote(t, safe=""),
             quote_plus(token), f"token {t}", base64.b64encode(t.encode()).decode().rstrip("="),
             base64.b64encode(f"user:{t}".encode()).decode()[8:-4]}
    # the token's own characters, however they are aligned in a longer base64 text
    for pad in (b"", b"x", b"xy"):
        enc = base64.b64encode(pad + t.encode()).decode()
        forms.add(enc[4 if pad else 0:(len(pad) + len(t)) // 3 * 4])
    return sorted(f for f in forms if len(f) >= 6)


def assert_not_leaked(token: str, *texts: str, root: Path | None = None) -> None:
    for form in leaked_forms(token):
        for text in texts:
            assert form not in text, f"token form {form!r} leaked in:\n{text}"
    if root is not None:  # every file of the repository, build/ included
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for form in leaked_forms(token):
                    assert form.encode() not in data, f"token form {form!r} in {path}"


def cli(root: Path, *args: str, token: str | None, api_url: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ANACONDA_API_TOKEN", "BINSTAR_API_TOKEN")}
    env.update({"ANACONDA_API_URL": api_url, "CI": "true"})
    if token is not None:
        env["ANACONDA_API_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "conda_distro", *args, "--root", str(root)], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def world(template, tmp_path):
    """A repository with anaconda:// staging and main, its local builds in build/channels/staging (for
    `upload`), test results, and the fake server holding the staging label (with the files' bytes) and
    one file already in main (for `retire` and `verify-channel`)."""
    with FakeAnaconda(TOKEN, lifetime=180) as srv:
        root = write_distro(tmp_path / "distro", staging="anaconda://builds/staging", main="anaconda://distro")
        local = copy_channel(template / "staging", root / "build" / "channels" / "staging")
        files = staging_files(local)
        write_results(root, files)
        docs = [{**api_doc(f), "content_b64": base64.b64encode((local / f.artifact).read_bytes()).decode()}
                for f in files.values()]
        srv.seed("builds", docs, label="staging")
        alpha = by_name(files)["alpha"]
        srv.seed("distro", [d for d in docs if d["basename"] == alpha.artifact], label="main")
        yield root, srv, files


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file but the (empty) lock files."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.parent.name != "locks"}


COMMANDS = [("promote",), ("retire", "alpha", "--reason", "broken"), ("upload",), ("verify-channel",)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["401", "404", "500", "refused"])
def test_server_failures_exit_2_and_never_show_the_token(world, mode):
    """Repro: ANACONDA_API_TOKEN=$'SECRET\\n' printed the header's repr in full. Every command that talks
    to anaconda.org, against every way the server can fail: exit 2, a clear message, no traceback, no
    form of the token anywhere (stdout, stderr, any file under the repository, build/ included), and
    nothing written."""
    root, srv, _ = world
    token = f"  {TOKEN}\n" if mode != "401" else "  tok-WRONG-but-still-secret-777\n"
    url = srv.url
    if mode in ("404", "500"):
        srv.fail(int(mode))
    elif mode == "refused":
        url = f"http://127.0.0.1:{closed_port()}"
    before = snapshot(root)
    for args in COMMANDS:
        res = cli(root, *args, token=token, api_url=url)
        out = res.stdout + res.stderr
        assert res.returncode == 2, (args, out)
        assert "Traceback" not in out and out.startswith("error: "), (args, out)
        assert "hint: " in res.stderr
        assert_not_leaked(token, out)
        if mode == "401":
            assert "***" in out and "ANACONDA_API_TOKEN" in out  # the server echoed the token: masked
        if mode == "404" and args[0] != "upload":  # upload first asks for the owner: a plain 404
            assert "404 for owner" in out, out  # not read as an empty label
    assert_not_leaked(token, root=root)
    assert snapshot(root) == before  # nothing written: no ledger, no retirement record
    if mode in ("404", "500", "401"):
        writes = [r for r in srv.requests() if r["method"] not in ("GET", "HEAD")]
        assert writes == [], writes


def test_token_with_surrounding_whitespace_is_stripped_and_works(world):
    root, srv, files = world
    token = f" \t{TOKEN}\r\n"
    res = cli(root, "promote", "--format", "json", token=token, api_url=srv.url)
    assert res.returncode == 1, res.stderr  # beta fails its tests: held
    doc = json.loads(res.stdout)
    assert {p["artifact"] for p in doc["promoted"]} == {by_name(files)["gamma"].artifact}
    assert {r["auth"] for r in srv.requests() if not r["path"].startswith("/_fake/")} == {"valid"}
    res2 = cli(root, "retire", "gamma", "--reason", "bad", token=token, api_url=srv.url)
    assert res2.returncode == 0, res2.stderr
    assert_not_leaked(token, res.stdout + res.stderr, res2.stdout + res2.stderr, root=root)
    assert (root / "channel_state" / "gamma.json").is_file()


@pytest.mark.parametrize("token", ["tök€n-SECRET-123", "tok SECRET 123", "tok\x00SECRET-123", "tok\u200bSECRET"])
def test_a_token_that_cannot_be_a_header_is_a_clear_exit_2(world, token):
    """Repro: a non-ASCII token gave a traceback (http.client cannot encode the header)."""
    root, srv, _ = world
    before = snapshot(root)
    if "\x00" in token:  # the OS refuses NUL in the environment: check the library path instead
        with pytest.raises(ChannelError, match="ANACONDA_API_TOKEN holds a control character") as exc:
            open_channel(load_config(root), "anaconda://distro", env={"ANACONDA_API_TOKEN": token})
        assert_not_leaked(token, str(exc.value), str(exc.value.hint))
        return
    for args in COMMANDS if token.startswith("tök") else COMMANDS[:1]:  # one read path: open_channel
        res = cli(root, *args, token=token, api_url=srv.url)
        out = res.stdout + res.stderr
        assert res.returncode == 2 and "Traceback" not in out, out
        assert "field 'ANACONDA_API_TOKEN'" in out and "printable ASCII" in out
        assert_not_leaked(token, out)
    assert [r for r in srv.requests() if not r["path"].startswith("/_fake/")] == []  # never sent
    assert snapshot(root) == before


def test_a_blank_token_is_no_token(world):
    root, srv, _ = world
    res = cli(root, "promote", token=" \n", api_url=srv.url)
    assert res.returncode == 2 and "needs a token" in res.stderr


# ---------------------------------------------------------------------------------------------
# the masking helper itself


def test_secret_is_masked_in_every_form():
    raw = "  abc-DEF/ghi+jkl=0123456789\n"
    s = Secret(raw.strip(), name="ANACONDA_API_TOKEN", raw=raw)
    t = raw.strip()
    texts = [t, raw, repr(raw), repr(f"token {raw}"), json.dumps({"h": raw}), quote(t, safe=""), quote_plus(t),
             f"https://x/?t={quote(t)}", base64.b64encode(t.encode()).decode(),
             base64.b64encode(f"user:{t}".encode()).decode(), base64.b64encode(f"ab{t}cd".encode()).decode()]
    for text in texts:
        masked = s.mask(f"<{text}>")
        assert MASK in masked, text
        assert_not_leaked(raw, masked)
    assert str(s) == repr(s) == "Secret(ANACONDA_API_TOKEN=***)" and t not in repr([s]) and s.reveal() == t
    assert s.mask("nothing secret here") == "nothing secret here"


def test_registered_secrets_are_masked_in_logs_tracebacks_and_child_envs(capsys, caplog):
    token = "tok-LOGGED-0987654321"
    env = {"ANACONDA_API_TOKEN": f"{token}\n", "GH_TOKEN": "g", "PATH": "/usr/bin"}
    secret = read_secret(env, "ANACONDA_API_TOKEN")
    assert secret is not None and secret.reveal() == token
    caplog.set_level(logging.DEBUG)
    logging.getLogger("binstar").debug("header %r", {"Authorization": f"token {token}"})
    assert token not in caplog.text and "***" in caplog.text
    try:
        raise ValueError(f"Invalid header value {f'token {token}'!r}")
    except ValueError:
        masked_excepthook(*sys.exc_info())
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError" in err and token not in err
    assert mask(f"x {token} y") == "x *** y"
    assert scrubbed_env(env) == {"PATH": "/usr/bin"}


def test_a_traceback_escaping_the_console_script_is_masked():
    """The console script's traceback hook stays ours while a command runs (typer's ``Typer.__call__``
    swaps ``sys.excepthook`` for its own, which prints through the hook it found at import: unmasked)."""
    token = "tok-ESCAPED-5566778899"
    script = (
        "import sys\n"
        "from conda_distro.cli import entrypoint\n"
        "from conda_distro.cli.app import app\n"
        "from conda_distro.util.secret import read_secret\n"
        f"read_secret({{'ANACONDA_API_TOKEN': {token!r}}}, 'ANACONDA_API_TOKEN')\n"
        "@app.command('boom')\n"
        "def boom() -> None:\n"
        f"    raise RuntimeError('upload refused for ' + {token!r})\n"
        "sys.argv = ['conda-distro', 'boom']\n"
        "entrypoint()\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res
    assert "Traceback" in res.stderr and "RuntimeError: upload refused for ***" in res.stderr, res.stderr
    assert token not in res.stdout + res.stderr


def test_channel_object_never_shows_the_token(tmp_path):
    token = "tok-REPR-1122334455"
    ch = AnacondaChannel("o", api_url="http://127.0.0.1:9", token=f"{token}\n")
    assert token not in repr(ch) + ch.describe() + repr(vars(ch))
    with pytest.raises(ChannelError) as exc:  # connection refused
        ch.list_files()
    assert exc.value.__cause__ is None and exc.value.__suppress_context__
    assert token not in str(exc.value)
    register(Secret(token, name="t"))


# ---------------------------------------------------------------------------------------------
# what a server may echo: every escaped, reversed, hex and base64 form is masked (property tests); a
# token too short to mask safely is refused


# tokens are printable ASCII (check_token); '*' is left out here: a token holding MASK's own characters
# could be "re-made" by masking next to surrounding text that happens to hold the rest of it
TOKEN_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="*")
TOKENS = st.text(TOKEN_CHARS, min_size=MIN_SECRET_LENGTH, max_size=40)
AROUND = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters="*"), max_size=12)

#: one character written the ways servers, logs and serializers write it (independent of conda_distro.util.secret)
CHAR_FORMS = {
    "itself": lambda c: c,
    "html decimal": lambda c: f"&#{ord(c)};",
    "html decimal, zero-padded": lambda c: f"&#{ord(c):04d};",
    "html hex": lambda c: f"&#x{ord(c):x};",
    "HTML HEX": lambda c: f"&#X{ord(c):X};",
    "html named": lambda c: html.escape(c, quote=True),
    "url": lambda c: f"%{ord(c):02x}",
    "URL": lambda c: f"%{ord(c):02X}",
    "python \\x": lambda c: f"\\x{ord(c):02x}",
    "json \\u": lambda c: f"\\u{ord(c):04x}",
}
#: the whole token in one form
WHOLE_FORMS = {
    **{name: functools.partial(lambda f, t: "".join(f(c) for c in t), f) for name, f in CHAR_FORMS.items()},
    "hex": lambda t: t.encode().hex(),
    "HEX": lambda t: t.encode().hex().upper(),
    "reversed": lambda t: t[::-1],
    "reversed, html": lambda t: "".join(f"&#{ord(c)};" for c in t[::-1]),
    "quote": lambda t: quote(t, safe=""),
    "quote_plus": quote_plus,
    "json": lambda t: json.dumps(t)[1:-1],
    "repr": lambda t: repr(t)[1:-1],
}


@settings(max_examples=300, deadline=None)
@given(token=TOKENS, form=st.sampled_from(sorted(WHOLE_FORMS)), before=AROUND, after=AROUND)
def test_every_encoded_form_of_a_token_is_masked(token, form, before, after):
    written = WHOLE_FORMS[form](token)
    masked = Secret(token, name="ANACONDA_API_TOKEN").mask(before + written + after)
    assert written not in masked and MASK in masked


@settings(max_examples=200, deadline=None)
@given(token=TOKENS, data=st.data())
def test_a_token_escaped_character_by_character_in_mixed_ways_is_masked(token, data):
    """A server that escapes only some characters, each its own way (``t&#111;k%2D…``)."""
    choices = data.draw(st.lists(st.sampled_from(sorted(CHAR_FORMS)), min_size=len(token), max_size=len(token)))
    written = "".join(CHAR_FORMS[how](c) for how, c in zip(choices, token, strict=True))
    masked = Secret(token, name="ANACONDA_API_TOKEN").mask(f"echo: {written}.")
    assert masked == f"echo: {MASK}."


def base64_core(token: bytes, pad: int, urlsafe: bool) -> str:
    """The base64 characters that depend on ``token`` alone when ``pad`` bytes come before it."""
    enc = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(b"\0" * pad + token).decode()
    return enc[4 if pad else 0:(pad + len(token)) // 3 * 4]


@settings(max_examples=300, deadline=None)
@given(token=TOKENS, before=st.binary(max_size=7), after=st.binary(max_size=7), urlsafe=st.booleans())
def test_base64_at_every_alignment_is_masked(token, before, after, urlsafe):
    raw = token.encode()
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(before + raw + after).decode()
    core = base64_core(raw, len(before) % 3, urlsafe)
    assert len(core) >= MIN_SECRET_LENGTH  # what the minimum length guarantees at every alignment
    masked = Secret(token, name="ANACONDA_API_TOKEN").mask(f"Authorization: Basic {text}")
    assert core not in masked and MASK in masked


@pytest.mark.parametrize("token", ["abcd", "  tok4\n", "1234567"])
def test_a_token_too_short_to_mask_is_refused_without_showing_it(token):
    with pytest.raises(ChannelError) as exc:
        read_secret({"ANACONDA_API_TOKEN": token}, "ANACONDA_API_TOKEN")
    message = f"{exc.value} {exc.value.hint}"
    assert "too short to be an API token" in message and f"at least {MIN_SECRET_LENGTH}" in message
    assert token.strip() not in message.replace("ANACONDA_API_TOKEN", "")
    assert exc.value.exit_code == 2


def test_a_short_token_is_exit_2_on_the_command_line(tmp_path):
    root = write_distro(tmp_path / "distro", staging="anaconda://builds/staging", main="anaconda://distro")
    res = cli(root, "promote", token="ab12", api_url=f"http://127.0.0.1:{closed_port()}")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "ANACONDA_API_TOKEN is too short to be an API token (4 character(s); at least 8)" in res.stderr
    assert "ab12" not in res.stdout + res.stderr
