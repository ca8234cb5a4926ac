"""docs/architecture.md names code that exists and does what the page says.

* "Where is the rule for X": every file and test named exists, every name of the rule
  resolves in its file, and every function of the last column calls the rule: its source
  names one of the rule's names, or the function named before it in the cell ("X, called
  by Y"); a name in backticks after a function is one of the rule's that the function uses.
* "Layers": the ``ORDER`` block is ``test_import_rules.ORDER``.
* "Module map": every module of ``airflow_cdc/``, ``devtools/`` and ``spark_jobs/`` has its
  line (a package's ``__init__.py`` aside; a folder named alone covers its modules), no
  file named is missing, and every dotted or class name of a line resolves.
* "Testing": every file of ``tests/integration/`` has a tier, and the in-process stream
  harness row names exactly the files that use ``InProcessStream``.
* Everywhere else on the page: a file named exists (test files by their name alone), and a
  dotted name that starts with a package of ``airflow_cdc`` resolves.

Names are resolved by importing the module and taking its attributes, so a module moved
or renamed makes the test name each row and line that still names its old place.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.unit.test_import_rules import ORDER

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_cdc"
PAGE = ROOT / "docs" / "architecture.md"
INTEGRATION = ROOT / "tests" / "integration"
TESTING = "Testing: what each tier runs against"
#: Folders of the repository whose every module the module map lists.
MAPPED = ("airflow_cdc", "devtools", "spark_jobs")

TOKEN = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
CLASS_NAME = re.compile(r"[A-Z][a-z]\w*")
PATH = re.compile(r"[\w.-]+(?:/[\w.-]*)*(?:::\w+)?")
MISSING = object()
#: Where a class named in a line may also live: the packages' exports.
PACKAGES = [f"airflow_cdc.{name}" for name in ORDER if (PACKAGE / name).is_dir()]


def sections(text: str) -> dict[str, str]:
    """The page's ``## `` sections by title."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def is_path(token: str) -> bool:
    return bool(PATH.fullmatch(token)) and ("/" in token or token.endswith(".py"))


def is_dotted_name(token: str) -> bool:
    return bool(DOTTED.fullmatch(token)) and not is_path(token)


def existing(token: str, *bases: Path) -> Path | None:
    """The file or folder ``token`` names, relative to one of ``bases`` (the first that
    has it), the repository or the package; ``None`` when there is none."""
    relative = token.split("::")[0].rstrip("/")
    for base in (*bases, ROOT, PACKAGE):
        if (base / relative).exists():
            return base / relative
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and (name + ".").startswith(error.name + "."):
            return MISSING
        raise


def lookup(dotted: str) -> Any:
    """What ``dotted`` names (a module, then attributes), or ``MISSING``."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        found = _imported(".".join(parts[:end]))
        if found is not MISSING:
            break
    else:
        return MISSING
    for attr in parts[end:]:
        fields = getattr(found, "__dataclass_fields__", {}) if isinstance(found, type) else {}
        if hasattr(found, attr):
            found = getattr(found, attr)
        elif attr in fields:  # a field without a default
            found = fields[attr]
        else:
            return MISSING
    return found


def resolve(name: str, bases: list[str]) -> Any:
    """``name`` in the first of the modules ``bases`` (then ``airflow_cdc``) it resolves in."""
    for base in [*bases, "airflow_cdc"]:
        found = lookup(f"{base}.{name}")
        if found is not MISSING:
            return found
    return MISSING


def in_package(dotted: str) -> bool:
    """Whether ``dotted`` starts with a module or package of ``airflow_cdc``."""
    first = dotted.split(".")[0]
    return (PACKAGE / first).is_dir() or (PACKAGE / f"{first}.py").is_file()


def names_used(obj: Any) -> set[str]:
    """Every name and attribute the source of ``obj`` (a function, method, property or
    class) mentions, its nested functions included."""
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(obj))))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used.update(alias.name for alias in node.names)
    return used


# "Where is the rule for X"


@dataclass
class Rule:
    name: str
    files: str
    tests: str
    callers: str
    modules: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)


def rules(text: str) -> list[Rule]:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in sections(text)["Where is the rule for X"].splitlines()
        if line.startswith("|")
    ]
    assert rows[0] == ["rule", "file", "test", "called in production by"], rows[0]
    return [Rule(name, files, tests, callers) for name, files, tests, callers in rows[2:]]


def rule_files(rule: Rule) -> Iterator[str]:
    """The file column: each file or folder must exist; each name must resolve in one of
    them (the rule's names, which its callers must use)."""
    where = f"'where is the rule' row {rule.name!r}, file column"
    tokens = TOKEN.findall(rule.files)
    for token in filter(is_path, tokens):
        path = existing(token)
        if path is None:
            yield f"{where}: {token} does not exist"
        else:
            rule.modules.append(module_name(path))
    for token in tokens:
        if is_path(token) or not (IDENTIFIER.fullmatch(token) or DOTTED.fullmatch(token)):
            continue
        if resolve(token, rule.modules) is MISSING:
            yield f"{where}: `{token}` is not in {', '.join(rule.modules) or 'any file named'}"
        rule.names.add(token.split(".")[-1])
    if not rule.names:
        yield f"{where}: names no function or class of the rule"


def rule_tests(rule: Rule) -> Iterator[str]:
    """The test column: each test file exists, and a ``file::test`` names a test in it."""
    for token in filter(is_path, TOKEN.findall(rule.tests)):
        path = existing(token)
        where = f"'where is the rule' row {rule.name!r}, test column: {token}"
        if path is None or not str(path.relative_to(ROOT)).startswith("tests/"):
            yield f"{where} does not exist"
        elif "::" in token:
            tree = ast.parse(path.read_text())
            defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            if token.split("::")[1] not in defined:
                yield f"{where}: no such test"


def rule_callers(rule: Rule) -> Iterator[str]:
    """The last column: each ``module.function`` exists and names one of the rule's names
    or the function named before it; a bare name after it is a rule's name it uses."""
    where = f"'where is the rule' row {rule.name!r}, 'called in production by' column"
    linked = set(rule.names)
    caller: tuple[str, set[str]] | None = None
    missing_before = False
    for token in TOKEN.findall(rule.callers):
        if IDENTIFIER.fullmatch(token):
            if missing_before:  # the function before it is reported already
                continue
            if caller is None or token not in rule.names or token not in caller[1]:
                yield f"{where}: `{token}` is not a name of the rule that the code before uses"
            continue
        if not is_dotted_name(token):
            yield f"{where}: `{token}` is not a dotted name of airflow_cdc"
            continue
        found = lookup(f"airflow_cdc.{token}")
        before = set(linked)
        linked.add(token.split(".")[-1])  # even if missing: its chain is reported once
        if found is MISSING:
            yield f"{where}: `{token}` does not exist"
            caller, missing_before = None, True
            continue
        missing_before = False
        used = names_used(found)
        if not used & before:
            yield f"{where}: `{token}` uses none of {sorted(before)}"
        caller = (token, used)


def test_every_rule_row_names_existing_code_that_calls_the_rule() -> None:
    problems: list[str] = []
    found = rules(PAGE.read_text())
    assert len(found) >= 10
    for rule in found:
        problems += rule_files(rule)
        problems += rule_tests(rule)
        problems += rule_callers(rule)
    assert not problems, "docs/architecture.md:\n" + "\n".join(problems)


# "Layers"


def test_the_layers_block_is_the_import_rules_order() -> None:
    body = sections(PAGE.read_text())["Layers"]
    block = re.search(r"^```\n(.*?)^```", body, re.M | re.S)
    assert block is not None
    listed = tuple(name.strip() for name in block.group(1).replace("\n", " ").split(","))
    assert listed == ORDER, "docs/architecture.md, Layers: the block is not ORDER"


# "Module map"


def map_lines(body: str) -> Iterator[tuple[str, str]]:
    """Each line of the map (a bullet with its continuation, or a paragraph) with the
    folder of its group (``**`source/`**: ...``)."""
    group = ""
    for block in re.split(r"\n(?=- |\*\*)", body):
        text = " ".join(block.split())
        heading = re.match(r"\*\*`([\w/]+)`\*\*", text)
        if heading:
            group = heading.group(1)
        elif text.startswith("**"):
            group = ""
        if text:
            yield group, text


def mapped_modules() -> set[Path]:
    """Every module the map must list: a package's ``__init__.py`` aside, the package's
    own aside."""
    return {
        path
        for folder in MAPPED
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "__init__.py" or path.parent == PACKAGE
    }


def check_map(body: str) -> tuple[list[str], set[Path]]:
    """The problems of the map's lines, and the files and folders it names."""
    problems: list[str] = []
    named: set[Path] = set()
    for group, text in map_lines(body):
        where = f"module map line {text[:70]!r}"
        tokens = TOKEN.findall(text)
        group_dirs = [d for d in (ROOT / group, PACKAGE / group) if group and d.is_dir()]
        own: list[Path] = []
        for token in filter(is_path, tokens):
            path = existing(token, *[p for p in own if p.is_dir()], *group_dirs)
            if path is None:
                problems.append(f"{where}: {token} does not exist")
            else:
                own.append(path)
        named.update(own)
        if not own and any(map(is_path, tokens)):
            continue  # its files are reported missing: its names would only repeat that
        bases = [
            module_name(p)
            for p in own
            if (p.suffix == ".py" or p.is_dir()) and p.is_relative_to(PACKAGE)
        ]
        bases += [b.rsplit(".", 1)[0] for b in bases if "." in b]
        for token in tokens:
            dotted = is_dotted_name(token) and (
                in_package(token) or resolve(token.split(".")[0], bases) is not MISSING
            )
            named_class = CLASS_NAME.fullmatch(token) and not hasattr(builtins, token)
            where_else = [*bases, *PACKAGES] if named_class else bases
            if (named_class or dotted) and resolve(token, where_else) is MISSING:
                problems.append(f"{where}: `{token}` is not in {', '.join(bases) or 'it'}")
    return problems, named


def unlisted(named: set[Path]) -> list[Path]:
    """The modules no line names: neither themselves nor a folder of theirs of which no
    module is named alone."""
    files = {p for p in named if p.is_file()}
    alone = [d for d in named if d.is_dir() and not any(d in f.parents for f in files)]
    return sorted(
        path
        for path in mapped_modules()
        if path not in named and not any(d in path.parents for d in alone)
    )


def test_the_module_map_lists_every_module_and_only_modules_that_exist() -> None:
    problems, named = check_map(sections(PAGE.read_text())["Module map"])
    problems += [f"module map: no line for {path.relative_to(ROOT)}" for path in unlisted(named)]
    assert not problems, "docs/architecture.md:\n" + "\n".join(problems)


# The rest of the page


def test_the_rest_of_the_page_names_existing_code() -> None:
    problems = []
    for title, body in sections(PAGE.read_text()).items():
        if title in ("Where is the rule for X", "Module map"):
            continue
        for token in TOKEN.findall(body):
            if is_path(token) and existing(token, INTEGRATION) is None:
                problems.append(f"section {title!r}: {token} does not exist")
            elif (
                is_dotted_name(token)
                and in_package(token)
                and lookup(f"airflow_cdc.{token}") is MISSING
            ):
                problems.append(f"section {title!r}: `{token}` does not exist")
    assert not problems, "docs/architecture.md:\n" + "\n".join(problems)


# "Testing"


def tiers(text: str) -> dict[str, str]:
    """The Testing table's rows: each tier's name and its files cell."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in sections(text)[TESTING].splitlines()
        if line.startswith("|")
    ]
    assert rows[0] == ["tier", "real", "stood in for", "files"], rows[0]
    return {row[0].strip("`"): row[3] for row in rows[2:]}


def test_the_testing_table_places_every_integration_file() -> None:
    """Every integration file has its tier, and the in-process harness row names exactly
    the files that drive the stream through ``tests/support/stream_harness.py``."""
    rows = tiers(PAGE.read_text())
    named = {name for cell in rows.values() for name in TOKEN.findall(cell)}
    files = sorted(INTEGRATION.glob("test_*.py"))
    problems = [
        f"section {TESTING!r}: no row names {path.name}" for path in files if path.name not in named
    ]
    harness = {p.name for p in files if "InProcessStream" in p.read_text()}
    cell = rows["in-process stream harness"]
    in_row = {token for token in TOKEN.findall(cell) if token.startswith("test_")}
    problems += [
        f"section {TESTING!r}, row 'in-process stream harness': add {name}"
        for name in sorted(harness - in_row)
    ]
    problems += [
        f"section {TESTING!r}, row 'in-process stream harness': {name} does not use it"
        for name in sorted(in_row - harness)
    ]
    assert not problems, "docs/architecture.md:\n" + "\n".join(problems)


# The checks themselves


def test_a_caller_that_does_not_call_the_rule_is_named() -> None:
    rule = Rule(
        "emit filter",
        "`airflow_cdc/stream/emit_filter.py` (`EmitFilter.should_emit`)",
        "`tests/unit/test_docs_architecture.py::test_a_caller_that_does_not_call_the_rule_is_named`",
        "`stream.slice_reader._read` (`should_emit`), `stream.start.start_position`, "
        "`stream.gone.f` (`should_emit`), called by `stream.gone.g`",
    )
    assert list(rule_files(rule)) == []
    assert list(rule_tests(rule)) == []
    found = list(rule_callers(rule))
    assert len(found) == 3
    assert "row 'emit filter'" in found[0]
    assert "`stream.start.start_position` uses none" in found[0]
    assert "`stream.gone.f` does not exist" in found[1]
    assert "`stream.gone.g` does not exist" in found[2]


def test_a_moved_module_is_named_in_the_map(tmp_path: Path) -> None:
    body = (
        "**`sinks/`**: where rows land.\n"
        "- `sinks/delta_gone.py`: `GoneSink`.\n"
        "- `sinks/contract/base.py`: the `Sink` protocol and `NoSuchThing`.\n"
    )
    problems, named = check_map(body)
    assert any("sinks/delta_gone.py does not exist" in p for p in problems)
    assert any("`NoSuchThing` is not in airflow_cdc.sinks.contract.base" in p for p in problems)
    assert len(problems) == 2  # not `GoneSink` too: its line is reported already
    left = unlisted(named)
    assert PACKAGE / "sinks" / "base.py" not in left
    assert len(left) == len(mapped_modules()) - 1
