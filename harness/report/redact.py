"""Redaction of what leaves the machine: evidence Markdown, gate Markdown, JSON and JUnit, the
compare HTML.

Replaced: home directories (this machine's, the runs' as seen in their manifests, and any
``/home/NAME``, ``/Users/NAME``, ``C:\\Users\\NAME`` or ``/root`` in the text) by ``~``; host names
(this machine's and the runs') by ``<host>``; user names (this machine's, and every NAME of a home
found in the runs or the text) by ``<user>``.  A user name of three characters or more is replaced
wherever it stands as a word; a shorter one (``al``, ``x``) only where it cannot be an ordinary
word: a path segment (``/data/al/``), ``al@``, or after ``user:`` / ``USER=`` and the like.
"""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_SEG = r"[^/\\\s\"'`<>|:;,()\[\]{}]+"  # one path segment
HOME_PATTERNS = (
    re.compile(rf"(?:/home|/Users)/(?P<user>{_SEG})"),
    re.compile(rf"[A-Za-z]:\\{{1,2}}Users\\{{1,2}}(?P<user>{_SEG})"),
)
ROOT_HOME = re.compile(r"(?<![\w/])/root(?![\w.-])")
SHORT_USER = 3  # user names shorter than this are replaced only in unambiguous places
NOT_USERS = {"", "shared", "public", "Shared", "Public", "runner"}


def _homes_in(text: str) -> list[tuple[str, str]]:
    return [(m.group(0), m.group("user")) for pattern in HOME_PATTERNS for m in pattern.finditer(text)]


class Redactor:
    """``Redactor(enabled, extra_hosts, runs=...)(text) -> text``; ``xml=True`` writes the
    placeholders escaped (``&lt;user&gt;``) for text that is already XML."""

    def __init__(self, enabled: bool = True, extra_hosts: list[str] | None = None, *, runs: Sequence[Any] = (),
                 xml: bool = False):
        self.enabled = enabled
        self.xml = xml
        self.homes: set[str] = set()
        self.users: set[str] = set()
        home = str(Path.home())
        if home not in ("/", ""):
            self.homes.add(home.rstrip("/"))
        try:
            self.users.add(getpass.getuser())
        except (KeyError, OSError):
            pass
        hosts = {socket.gethostname(), socket.getfqdn(), *(extra_hosts or [])}
        for run in runs:  # a run made elsewhere: its home, user and host, as its manifest shows them
            record = getattr(run, "record", None)
            manifest = record.to_manifest() if record is not None else run
            hosts.add((manifest.get("host") or {}).get("hostname") or "")
            for key in ("user", "home"):
                value = (manifest.get("host") or {}).get(key)
                if value:
                    (self.users if key == "user" else self.homes).add(str(value).rstrip("/"))
            for path, user in _homes_in(json.dumps(manifest, default=str).replace("\\\\", "\\")):
                self.homes.add(path)
                self.users.add(user)
        self.hosts = {h for h in hosts if h and h != "localhost"}

    def _tag(self, name: str) -> str:
        return f"&lt;{name}&gt;" if self.xml else f"<{name}>"

    def __call__(self, text: str) -> str:
        if not self.enabled:
            return text
        users = set(self.users)
        homes = set(self.homes)
        for path, user in _homes_in(text):  # homes named in the text itself
            homes.add(path)
            users.add(user)
        for home in sorted(homes, key=len, reverse=True):
            text = re.sub(rf"{re.escape(home)}(?![^/\\\s\"'`<>|:;,()\[\]{{}}])", "~", text)
        text = ROOT_HOME.sub("~", text)
        for host in sorted(self.hosts, key=len, reverse=True):
            text = re.sub(rf"\b{re.escape(host)}\b", self._tag("host"), text)
        tag = self._tag("user")
        for user in sorted(users - NOT_USERS, key=len, reverse=True):
            u = re.escape(user)
            text = re.sub(rf"(?<=[/\\]){u}(?=[/\\]|$|[\s\"'`<>|:;,)\]}}])", tag, text)  # a path segment
            text = re.sub(rf"(?<![\w.-]){u}@", tag + "@", text)
            text = re.sub(rf"(?i)((?:user|username|login|logname|owner)[\"']?\s*[:=]\s*[\"']?){u}(?![\w-])",
                          lambda m: m.group(1) + tag, text)
            if len(user) >= SHORT_USER:
                text = re.sub(rf"\b{u}\b", tag, text)
        return text


DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")


def redact_html(red: Redactor, html: str) -> str:
    """An HTML page's text through ``red`` (built with ``xml=True``: placeholders escaped), its
    inline images untouched (base64 can hold a user name's letters by chance)."""
    out, last = [], 0
    for m in DATA_URI.finditer(html):
        out += [red(html[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(red(html[last:]))
    return "".join(out)
