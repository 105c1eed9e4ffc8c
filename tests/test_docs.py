"""The guide cannot rot: README.md and docs/*.md name only real things.

- every relative link (``[text](path)``, ``![alt](path)``) names a file or
  folder of the repository (benchmarks/README.md's and its groups' links too) (an ``#anchor`` is optional and not checked);
- every ``proofbatch ...`` command line in a ```sh fence is read by the real
  parser (runner.cli.build_parser, every subcommand registered, the provers'
  included): its subcommand exists, every ``--flag`` it names (inside
  ``[optional groups]`` too) is one of that subcommand's, a literal value
  of a flag with choices is one of them, and the line with its optional
  groups dropped parses (placeholders such as CORPUS, DIR or N stand for
  values; typed ones get a sample value of their type);
- a ``proofbatch ...`` in an inline code span names a real subcommand and
  real flags of it;
- a repository path in a code span (``runner/sweep.py``,
  ``benchmarks/native/native.py``) exists.

The last tests feed the checker deliberately bad snippets, so that a checker
that accepts everything fails here.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from runner.cli import build_parser
from runner.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Top-level folders whose paths, named in a code span, must exist.
REPO_DIRS = ("runner/", "cluster/", "benchmarks/", "tests/", "scripts/", "examples/", "slurm/",
             "profiles/", "timeout_maps/", "docs/")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(\s*)(`{3,})(\w*)\s*$")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# A value standing for what the user gives: CORPUS, DIR, N, OUT/plan.json,
# profiles/NAME, timeout_maps/NAME.json, FILE.ml|DIR..., ~/hol-light, tcp://HOST:PORT.
# A command line: `proofbatch ...`, after a prompt or environment assignments.
COMMAND_START = re.compile(r"^(?P<lead>\s*(\$\s+)?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)proofbatch(\s|$)")
PLACEHOLDER = re.compile(r"(^|[/.|:])[A-Z][A-Z0-9_]*($|[/.|:])")


# -- reading the markdown ------------------------------------------------------

def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of each fenced code block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        body, j = [], i + 1
        while j < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append((lang, i + 2, body))
        i = j + 1
    return blocks


def prose(text: str) -> str:
    """The text with its fenced blocks blanked (line numbers kept)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        ticks = m.group(2)
        out.append("")
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[i]):
            out.append("")
            i += 1
        out.append("")
        i += 1
    return "\n".join(out)


def command_lines(body: list[str]) -> list[str]:
    """The `proofbatch ...` commands of a sh block, each joined with its
    continuations (a trailing backslash, or indented lines after it)."""
    commands, current = [], None
    for line in body:
        code = _uncomment(line)
        if current is not None and (current.endswith("\\") or (line[:1].isspace() and code.strip())):
            current = current.rstrip("\\").rstrip() + " " + code.strip()
            continue
        if current is not None:
            commands.append(current)
            current = None
        if m := COMMAND_START.match(code):
            current = code[m.end("lead"):].rstrip()
    if current is not None:
        commands.append(current)
    return [c.rstrip("\\").strip() for c in commands]


def _uncomment(line: str) -> str:
    """The line less a shell comment (`  # ...`)."""
    return re.split(r"(?:^|\s)#(?=\s|$)", line, maxsplit=1)[0].rstrip()


# -- the parser ----------------------------------------------------------------

_PARSER: argparse.ArgumentParser | None = None


def parser() -> argparse.ArgumentParser:
    global _PARSER
    if _PARSER is None:
        _PARSER = build_parser()       # no argv: every subcommand with its arguments
    return _PARSER


def subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("proofbatch's parser has no subcommands")


def options(sub: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in sub._actions for s in a.option_strings}


def strip_optional(text: str) -> str:
    """``text`` without its [bracketed groups] (nested ones too)."""
    while True:
        stripped = re.sub(r"\[[^\[\]]*\]", " ", text)
        if stripped == text:
            return text
        text = stripped


def _sample(action: argparse.Action, value: str) -> str:
    """A value the parser reads in place of the placeholder ``value``."""
    if not PLACEHOLDER.search(value) and value not in ("...",):
        return value
    kind = getattr(action.type, "__name__", "")
    if action.choices:
        return str(next(iter(action.choices)))
    return {"int": "1", "float": "1.5", "size": "8G",
            "scheduler_address": "tcp://127.0.0.1:8786"}.get(kind, value)


def problems(command: str, *, full: bool = True) -> list[str]:
    """What is wrong with the command line ``command`` ("proofbatch ..."),
    read by the real parser; [] when nothing is. ``full``: also parse the
    line with its optional groups dropped."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return [f"cannot split {command!r}: {exc}"]
    assert words[0] == "proofbatch", command
    rest = words[1:]
    if not rest:
        return ["no subcommand"]
    if rest[0].startswith("-"):          # proofbatch --version / --help
        flags = [w.strip("[]") for w in rest]
        known = options(parser())
        return [f"{f} is not an option of proofbatch" for f in flags
                if f.startswith("-") and f not in known]
    name = rest[0]
    subs = subcommands()
    if name not in subs:
        return [f"{name!r} is not a proofbatch subcommand (they are {', '.join(subs)})"]
    sub = subs[name]
    known = options(sub)
    wrong = []
    # Every flag named, in optional groups too, with literal choices checked.
    flat = re.sub(r"[\[\]()]", " ", command).split()
    for i, word in enumerate(flat):
        for alt in word.split("|"):
            flag = alt.split("=", 1)[0].rstrip(",")
            if not re.match(r"^--?[A-Za-z]", flag):
                continue
            if flag not in known:
                wrong.append(f"`{name}` has no option {flag}")
                continue
            action = known[flag]
            value = alt.split("=", 1)[1] if "=" in alt else (flat[i + 1] if i + 1 < len(flat) else "")
            if action.choices and value and not value.startswith("-") \
                    and not PLACEHOLDER.search(value) and value != "...":
                for choice in value.split("|"):
                    if choice and choice not in action.choices:
                        wrong.append(f"`{name} {flag}`: {choice!r} is not one of "
                                     f"{', '.join(map(str, action.choices))}")
    if wrong or not full:
        return wrong
    # The line itself, its optional groups dropped and placeholders given values.
    words = [w for w in shlex.split(strip_optional(command))[1:] if w != "..."]
    given = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        action = known.get(before)
        given.append(_sample(action, word) if action is not None and action.nargs != 0 else word)
    try:
        parser().parse_args(given)
    except InputError as exc:
        return [f"the parser refuses it: {exc}"]
    except SystemExit:
        return ["the parser refuses it"]
    return []


# -- what the documents hold -----------------------------------------------------

def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def links(path: Path) -> list[tuple[int, str]]:
    text = prose(path.read_text())
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            found.append((n, target))
    return found


def broken_links(path: Path) -> list[str]:
    bad = []
    for n, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue            # a URL (http:, mailto:) or an anchor of this page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            bad.append(f"{doc_id(path)}:{n}: link to {target}, which does not exist")
    return bad


def sh_commands(path: Path) -> list[tuple[int, str]]:
    found = []
    for lang, first, body in fenced_blocks(path.read_text()):
        if lang in ("sh", "bash", "console", "shell"):
            found.extend((first, c) for c in command_lines(body))
    return found


def inline_commands(path: Path) -> list[tuple[int, str]]:
    found = []
    for n, line in enumerate(prose(path.read_text()).splitlines(), 1):
        for span in SPAN.findall(line):
            if re.match(r"^proofbatch\s+\S", span):
                found.append((n, span))
    return found


def repo_paths(path: Path) -> list[tuple[int, str]]:
    found = []
    for n, line in enumerate(prose(path.read_text()).splitlines(), 1):
        for span in SPAN.findall(line):
            for word in span.split():
                word = word.strip("(),;:'\"").split("::", 1)[0]
                if word.startswith(REPO_DIRS) and not re.search(r"[*<>{}$]|[A-Z]{2,}", word) \
                        and "..." not in word:
                    found.append((n, word))
    return found


# -- the tests -------------------------------------------------------------------

def test_the_documents_exist():
    assert (ROOT / "README.md").exists()
    assert len(DOCS) > 5, "docs/ holds the guide"


@pytest.mark.parametrize("path", [*DOCS, *sorted((ROOT / "benchmarks").glob("**/README.md"))], ids=doc_id)
def test_every_relative_link_names_a_real_file(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_every_proofbatch_command_line_is_read_by_the_real_parser(path):
    bad = [f"{doc_id(path)}:{n}: {c}\n    " + "; ".join(p)
           for n, c in sh_commands(path) if (p := problems(c))]
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_every_inline_proofbatch_command_names_real_flags(path):
    bad = [f"{doc_id(path)}:{n}: {c}: " + "; ".join(p)
           for n, c in inline_commands(path) if (p := problems(c, full=False))]
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_every_repository_path_in_code_exists(path):
    bad = [f"{doc_id(path)}:{n}: {p} does not exist" for n, p in repo_paths(path)
           if not (ROOT / p.rstrip("/")).exists()]
    assert bad == [], "\n".join(bad)


def test_the_readme_opens_with_its_two_commands_and_stays_short():
    text = (ROOT / "README.md").read_text()
    lang, _, body = fenced_blocks(text)[0]
    assert [line.split("#")[0].strip() for line in body] == ["bash scripts/demo.sh",
                                                              "bash scripts/test.sh"]
    assert len(text.splitlines()) <= 260
    assert "## Layout" in text


def test_the_docs_are_reached_from_the_readme():
    readme = {t.split("#")[0] for _, t in links(ROOT / "README.md")}
    every = set(readme)
    for path in DOCS[1:]:
        every |= {str(Path("docs") / t.split("#")[0]) for _, t in links(path)}
    missing = [doc_id(p) for p in DOCS[1:] if doc_id(p) not in every]
    assert missing == [], f"pages no document links to: {missing}"


# -- the checker itself: it must fail on what is wrong -------------------------

BAD_DOC = """\
# A page

See [the sweep](docs/no-such-page.md) and [code](runner/sweep.py).

```sh
proofbatch run CORPUS --out DIR --no-such-flag
proofbatch run CORPUS --out DIR [--workers N] [--made-up-option X]
proofbatch frobnicate CORPUS
proofbatch run CORPUS --out DIR --mode turbo
PROOFBATCH_PROVERS=x:PROVER proofbatch run CORPUS --out DIR --bogus-env-flag
proofbatch run CORPUS --out DIR \\
    --workers many
proofbatch simulate --workers 8
```

Also `proofbatch report OUT --pdf x` and `runner/no_such_module.py`.
"""

GOOD_DOC = """\
```sh
proofbatch run CORPUS --out DIR [--answers DIR|FILE.csv] [--workers N]
    [--sandbox auto|bwrap|rlimits|none] [--mem-limit SIZE]
proofbatch run examples/hol_light_demo --out /tmp/x \\
    --problems 'arith.*' --mode native --no-fallback   # a comment --not-a-flag
proofbatch simulate --plan OUT/plan.json [--workers N ...]
proofbatch extract FILE.ml|DIR... --out CORPUS [--ids-from MAP] [--strict]
proofbatch --version
```
"""


def _check(tmp_path, text: str) -> list[str]:
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "sweep.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text(text)
    found = broken_links(page)
    found += [f"{c}: {p}" for _, c in sh_commands(page) if (p := problems(c))]
    found += [f"{c}: {p}" for _, c in inline_commands(page) if (p := problems(c, full=False))]
    found += [p for _, p in repo_paths(page) if not (ROOT / p).exists()]
    return found


def test_the_checker_finds_what_a_bad_page_gets_wrong(tmp_path):
    found = "\n".join(_check(tmp_path, BAD_DOC))
    assert "docs/no-such-page.md" in found
    assert "runner/sweep.py, which" not in found          # that link is good
    assert "--no-such-flag" in found
    assert "--made-up-option" in found                    # inside an optional group
    assert "'frobnicate' is not a proofbatch subcommand" in found
    assert "'turbo' is not one of" in found
    assert "--bogus-env-flag" in found                   # after an environment assignment
    assert "--workers" in found and "cannot read 'many'" in found   # continued line, parsed
    assert "simulate" in found and "refuses" in found            # a required group missing
    assert "--pdf" in found                                       # inline span
    assert "runner/no_such_module.py" in found


def test_the_checker_accepts_synopses_placeholders_and_continuations(tmp_path):
    assert _check(tmp_path, GOOD_DOC) == []
