"""The one typed TOML reader (harness/typed_toml.py): values checked against annotations, tables
into dataclasses, bad input refused with what, where and what to do (exit 2)."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness import typed_toml
from harness.errors import BadInput


@dataclass(frozen=True)
class Table:
    name: str
    n: int = 1
    share: float = 0.5
    tags: list[str] = field(default_factory=list)
    env: dict[str, str | int] = field(default_factory=dict)
    limit: int | None = None
    anything: Any = None


def test_a_table_becomes_its_dataclass_with_ints_widened_to_floats():
    t = typed_toml.load(Table, {"name": "x", "share": 1, "tags": ["a"], "env": {"A": 1, "B": "b"}, "anything": [1]},
                        "f.toml")
    assert t == Table("x", 1, 1.0, ["a"], {"A": 1, "B": "b"}, None, [1]) and isinstance(t.share, float)


@pytest.mark.parametrize(("raw", "message"), [
    ({"name": 3}, "name has the wrong type: it must be a string, not 3"),
    ({"name": "x", "n": True}, "n has the wrong type: it must be an integer, not True"),
    ({"name": "x", "n": 2.5}, "n has the wrong type: it must be an integer, not 2.5"),
    ({"name": "x", "share": "half"}, "share has the wrong type: it must be a number, not 'half'"),
    ({"name": "x", "tags": "a"}, "tags has the wrong type: it must be a list of a string, not 'a'"),
    ({"name": "x", "tags": ["a", 5]}, r"tags has the wrong type: tags\[1\] must be a string, not 5"),
    ({"name": "x", "env": {"A": [1]}}, r"env has the wrong type: env.A must be a string or an integer, not \[1\]"),
    ({"name": "x", "limit": "none"}, "limit has the wrong type: it must be an integer, not 'none'"),
    ({"name": "x", "nmae": "y"}, r"unknown key\(s\) nmae"),
    ({}, r"missing key\(s\) name"),
])
def test_bad_input_says_what_where_and_what_to_do(raw, message):
    with pytest.raises(BadInput, match=message) as exc:
        typed_toml.load(Table, raw, "f.toml", fix="fix f.toml")
    assert exc.value.exit_code == 2 and exc.value.where == "f.toml" and exc.value.hint


def test_a_prefix_and_noun_name_the_table_in_messages():
    with pytest.raises(BadInput, match=r"unknown parameter\(s\) x") as exc:
        typed_toml.load(Table, {"name": "a", "x": 1}, "spec: [params]", prefix="params.", noun="parameter")
    assert "known: name, n, share, tags, env, limit, anything" in str(exc.value)
    with pytest.raises(BadInput, match="params.n has the wrong type"):
        typed_toml.load(Table, {"name": "a", "n": "1"}, "spec", prefix="params.")


def test_check_fields_checks_a_built_dataclass_but_the_skipped_fields():
    typed_toml.check_fields(Table("x", tags=["a"]), "spec")
    with pytest.raises(BadInput, match="n has the wrong type"):
        typed_toml.check_fields(Table("x", n="2"), "spec")  # type: ignore[arg-type]
    typed_toml.check_fields(Table("x", n="2"), "spec", skip={"n"})  # type: ignore[arg-type]
