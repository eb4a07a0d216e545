"""The scenario reader's two event sources: libyaml (fast) and PyYAML's Python parser.

The reader takes libyaml's events where PyYAML was built with it and composes them itself, so
the limits hold either way; these tests hold the two sources to the same documents, the limits to
the libyaml path, and the error messages to the Python parser's wording.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simharness.errors import ScenarioError
from simharness.scenario import reading

ROOT = Path(__file__).resolve().parents[2]

def _utf8(path: Path) -> bool:
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # refused before any parser sees it
        return False
    return True


FILES = sorted(p for p in [*ROOT.glob("scenarios/*.yaml"), *ROOT.glob("tests/scenarios/*.yaml"),
                           *ROOT.glob("tests/bad_inputs/*.yaml")] if _utf8(p))
needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


def _outcome(loader_class: type, text: str) -> tuple:
    try:
        return ("data", reading._parse(loader_class, text))
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__)
    except ValueError as exc:
        return ("error", str(exc))


@needs_libyaml
def test_libyaml_is_the_event_source_and_composing_stays_ours() -> None:
    assert reading._LimitedLoader is reading._LibyamlLoader
    # libyaml's own composer would recurse in C with no depth limit: ours must come first.
    assert reading._LibyamlLoader.get_single_node is yaml.composer.Composer.get_single_node
    assert reading._LibyamlLoader.compose_node is reading._Limited.compose_node


@needs_libyaml
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_sources_read_every_shipped_file_alike(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _outcome(reading._LibyamlLoader, text) == _outcome(reading._PythonLoader, text)


@needs_libyaml
def test_deep_nesting_is_refused_on_the_libyaml_path() -> None:
    text = "a: " + "[" * 500 + "]" * 500 + "\n"
    with pytest.raises(yaml.composer.ComposerError, match="nesting deeper than 100"):
        reading._parse(reading._LibyamlLoader, text)
    # deeper than libyaml's own flow limit: its error, then the Python parser's refusal
    with pytest.raises(yaml.composer.ComposerError, match="nesting deeper than 100"):
        reading.parse_text("a: " + "[" * 20_000 + "]" * 20_000 + "\n")


def test_an_error_is_worded_as_the_python_parser_words_it(tmp_path: Path) -> None:
    bad = tmp_path / "tab.yaml"
    bad.write_text("name: x\nwalks:\n\t- a\n")
    with pytest.raises(ScenarioError) as err:
        reading.read_yaml(bad)
    # libyaml says only "found character that cannot start any token"
    assert "found character '\\t' that cannot start any token" in str(err.value)
    assert "line 3, column 1" in str(err.value)


def test_a_lone_surrogate_is_refused_as_the_python_parser_refuses_it() -> None:
    # what an undecodable byte of a command-line value becomes; libyaml cannot even encode it
    with pytest.raises(yaml.YAMLError, match="unacceptable character #xdcff"):
        reading.parse_text("a: \udcff")


def _read(text: str) -> tuple:
    try:
        return ("data", reading.parse_text(text))
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__)
    except ValueError as exc:
        return ("error", str(exc))


@needs_libyaml
@pytest.mark.parametrize("text", [
    "a :\t0\n",        # libyaml takes the tab as space; the Python parser refuses it
    "a: !\n",          # a bare tag: '' to libyaml, None to the Python parser
    "a: >#\n",         # a header with a comment glued on: '' to libyaml, refused by the other
    "a: |2-#c\n",
])
def test_what_libyaml_reads_otherwise_is_read_by_the_python_parser(text: str) -> None:
    assert _outcome(reading._LibyamlLoader, text) != _outcome(reading._PythonLoader, text)
    assert _read(text) == _outcome(reading._PythonLoader, text)


_TOKENS = ["a", "b: ", "- ", "  ", "\n", "1", "0x1F", "1e3", ".inf", "~", "null", "yes", "on",
           "'x'", '"y"', "[", "]", "{", "}", ", ", "? ", ": ", "&a ", "*a", "<<: ", "#c", " #c",
           "|", ">-", "|2", "---", "...", "%YAML 1.1", "\u00e9", "\\n", "2001-12-14", "12:30:00",
           "-1", "+1", "_", "0o17", "1_000", "\t", "!", "!!str "]


@needs_libyaml
@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKENS), max_size=24).map("".join))
def test_a_text_means_the_same_with_or_without_libyaml(text: str) -> None:
    # the reader's promise, checked as the differential fuzz that found the cases above did
    assert _read(text) == _outcome(reading._PythonLoader, text)
