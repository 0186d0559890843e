"""Host paths out of everything pred says that leaves the harness: to the agent, and into records.

pred and pred-extract are compiled with the paths of their sources in them (cargo's registry for
the library and its dependencies, the checkout for an extractor built there), and a panic names
one: `thread 'main' panicked at /root/.cargo/registry/src/index.crates.io-…/problemreductions-0.5.0/
src/rules/x.rs:10:5`. Two readers get pred's words, and both get them through these rules:

- the agent, through the gateway (session/redact.py, `rules(source_dir)`): the library's paths are
  written as the agent sees them (SOURCE_DIR, where it can open the file at that line), every other
  crate's and the extractor's under neutral prefixes (CRATES_DIR, EXTRACTOR_DIR);
- a record (a Verdict, with its evidence: verify/verdict.py, `record_rules()`): the same, and the
  places of this host a verification touches written as neutral names too (`places()`: the home, the
  predbench cache, the temporary directory the verifier works in, the checkout), so a record or
  a report copied elsewhere tells nothing of the machine, and two machines' records compare equal.

The binaries themselves are left as built: they are the environment the verdicts were recorded
with; the verifier's own checks read pred's output as it came (a panic's place decides a crash:
verify/extractor.py), and only what is recorded or shown is rewritten.

Written with `find` and literal patterns, never with a backtracking one: pred's output is the
agent's to shape (it echoes file names and arguments), and a path pattern like
`/[^\\s]*/registry/src/` tried at every slash of a long run of slashes costs the square of its
length, in the harness.
"""

import os
import re
import tempfile
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_predbench.verify import pin

SOURCE_DIR = "/src/problemreductions"
"""Where the agent's sandbox binds the library source, and how every record names it."""
CRATES_DIR = "/cargo/registry/src"
EXTRACTOR_DIR = "/predbench/extractor"

REGISTRY = b"/registry/src/"
EXTRACTOR = b"/pytest_predbench/verify/extractor"
LIBRARY = b"problemreductions-"
DELIMITERS = re.compile(rb"([\s:'\"`]+)")
"""What ends a path in pred's output (a panic's `file:line:col`, a quoted path)."""
NAME_CHARS = rb"A-Za-z0-9._~+@-"
"""What a path component is made of: a host place is a place only where none of these touch it
(`/tmp` in `/tmp/x` and in `'/tmp'`, never in `/tmpfs` nor in `src/tmp/x`)."""

HOME, CACHE, TEMPORARY, CHECKOUT = "~", "$PREDBENCH_CACHE", "$TMPDIR", "/predbench"
"""The neutral names of the host places a record may mention (`places()`)."""


@dataclass(frozen=True)
class Rules:
    """One reader's rewriting: `sources` (the library's own directory as built) written as
    SOURCE_DIR, then any crate of any cargo registry and the extractor, then `places` (a host
    directory, its neutral name), longest first."""

    sources: tuple[bytes, ...] = ()
    places: tuple[tuple[bytes, bytes], ...] = ()
    kept: tuple[str, ...] = ()
    """Paths left as they are wherever they occur: the names a reader gave its own input."""

    def keeping(self, *names: str | None) -> "Rules":
        """These rules, leaving `names` as given (a name without a `/` holds no path to keep)."""
        return replace(self, kept=tuple(sorted({n for n in names if n and "/" in n}, key=len, reverse=True)))

    @cached_property
    def triggers(self) -> tuple[str, ...]:
        """What a text holds when there is anything to rewrite in it (none: it is left as it is)."""
        found = (*self.sources, REGISTRY, EXTRACTOR, *self.names)
        return tuple(t.decode("utf-8", "surrogateescape") for t in found)

    @property
    def names(self) -> tuple[bytes, ...]:
        return tuple(place for place, _ in self.places)


def rules(source_dir: str) -> Rules:
    """The gateway's rewriting for a library built at `source_dir`: that directory, any crate of
    a cargo registry, the extractor (the agent's own paths, /scratch and /tmp, are its to see)."""
    return Rules(sources=(source_dir.rstrip("/").encode(),))


def record_rules() -> Rules:
    """A record's rewriting: the gateway's patterns (any registry's crates, the extractor; the
    library is always in a registry, or remapped to one by a mint: mint/build.py), and the host
    places (read at each call: a test or a worker may set PREDBENCH_CACHE or TMPDIR)."""
    return _record_rules(tuple(places()))


@lru_cache(maxsize=8)
def _record_rules(found: tuple[tuple[str, str], ...]) -> Rules:
    ordered = sorted({(p.encode(), n.encode()) for p, n in found}, key=lambda pair: -len(pair[0]))
    return Rules(places=tuple(ordered))


def places() -> list[tuple[str, str]]:
    """(host directory, neutral name) of every place of this host a verification touches: the
    predbench cache (its binaries, its staged extractor), the temporary directory (the verifier's
    work dir is made there), the checkout (fixtures, the extractor's crate) and the home, each also
    as its real path when a symlink leads to it. The root itself is never one."""
    found = [
        (str(pin.cache_root()), CACHE),
        (tempfile.gettempdir(), TEMPORARY),
        ("/tmp", TEMPORARY),
        ("/var/tmp", TEMPORARY),
        (str(Path(__file__).resolve().parents[2]), CHECKOUT),
        (str(Path.home()), HOME),
        ("/root", HOME),
    ]
    resolved = [(os.path.realpath(place), name) for place, name in found]
    stripped = [(place.rstrip("/"), name) for place, name in found + resolved]
    return [(place, name) for place, name in stripped if place.startswith("/")]


def _component_end(token: bytes, start: int) -> int:
    end = token.find(b"/", start)
    return len(token) if end < 0 else end


def _token(token: bytes) -> bytes:
    """One path-like token rewritten: from its first `/` to the last registry (or extractor) part."""
    first = token.find(b"/")
    at = token.rfind(REGISTRY)
    while 0 <= first < at:  # the last registry part followed by a component (as greedy matching finds)
        after = at + len(REGISTRY)
        end = _component_end(token, after)
        if end > after:
            version = end + 1 + len(LIBRARY)
            if token.startswith(LIBRARY, end + 1) and token[version : version + 1].isdigit():
                token = token[:first] + SOURCE_DIR.encode() + token[_component_end(token, version) :]
            else:
                token = token[:first] + CRATES_DIR.encode() + token[end:]
            break
        at = token.rfind(REGISTRY, 0, at)
    first = token.find(b"/")
    at = token.rfind(EXTRACTOR)
    if 0 <= first < at:
        token = token[:first] + EXTRACTOR_DIR.encode() + token[at + len(EXTRACTOR) :]
    return token


@lru_cache(maxsize=8)
def _place_pattern(names: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """The places as literals between non-name characters: one pass, no backtracking."""
    alternatives = b"|".join(re.escape(name) for name in names)
    return re.compile(rb"(?<![" + NAME_CHARS + rb"])(?:" + alternatives + rb")(?![" + NAME_CHARS + rb"])")


def rewrite(data: bytes, rules: Rules) -> bytes:
    """`data` with every path the rules know rewritten. Linear in `data`: one replace per source,
    one split, `find`s within each path-like token, one pass over the places."""
    for source in rules.sources:
        data = data.replace(source, SOURCE_DIR.encode())
    if REGISTRY in data or EXTRACTOR in data:
        parts = DELIMITERS.split(data)
        data = b"".join(_token(part) if REGISTRY in part or EXTRACTOR in part else part for part in parts)
    if rules.places:
        named = dict(rules.places)
        data = _place_pattern(rules.names).sub(lambda m: named[m.group(0)], data)
    return data


KEPT = "\x00predbench-kept-{}\x00"
"""What a kept name stands as while the rest is rewritten (no path is made of NUL bytes)."""


def redact_text(text: str, rules: Rules) -> str:
    """`text` rewritten, but for the names `rules` keep (the same object when nothing is rewritten)."""
    if not any(trigger in text for trigger in rules.triggers):
        return text
    shielded = text
    for n, name in enumerate(rules.kept):
        shielded = shielded.replace(name, KEPT.format(n))
    redacted = rewrite(shielded.encode("utf-8", "surrogatepass"), rules).decode("utf-8", "surrogatepass")
    for n, name in enumerate(rules.kept):
        redacted = redacted.replace(KEPT.format(n), name)
    return text if redacted == text else redacted


def redacted(value: Any, rules: Rules) -> Any:
    """Every string in `value` (a model, and the lists, dicts and models it holds) rewritten; what
    holds none to rewrite is returned as the same object, and a model is copied, never changed."""
    if isinstance(value, str):
        return redact_text(value, rules)
    if isinstance(value, BaseModel):
        changed = {name: new for name, old in value if (new := redacted(old, rules)) is not old}
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, list | tuple):
        items = [redacted(item, rules) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(redacted(k, rules), redacted(v, rules)) for k, v in value.items()]
        same = all(k is a and v is b for (k, v), (a, b) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value
