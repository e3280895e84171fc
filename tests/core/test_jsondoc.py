"""JSON text read strictly: a key given twice in an object is refused with the key and its line
(Python's json keeps the last: ``"gpus": 1, "gpus": 9999`` asked for 9999), and a whole number
too long for ``int()`` is kept apart as a :class:`LongNumber` for the field's check to refuse.
Whole numbers written as text follow one rule (ASCII digits, not too many)."""

from __future__ import annotations

import json

import pytest

from jupyter_gpupool.core.documents import json_reader
from jupyter_gpupool.core.documents.whole_numbers import MAX_NUMBER_DIGITS, parse_whole


def test_json_refuses_a_key_twice_with_its_line():
    with pytest.raises(json_reader.KeyTwice) as e:
        json_reader.loads('{"user": "dave", "pools": ["dev-pool"], "gpus": 1, "gpus": 9999}')
    assert (e.value.key, e.value.line, e.value.column) == ("gpus", 1, 52)
    assert str(e.value) == 'the key "gpus" is given twice in one object (line 1, column 52)'
    # the first in reading order, however deep; lines count
    text = '{"a": {"x": 1},\n "b": [{"c": 1,\n         "c": 2}],\n "a": 3}'
    with pytest.raises(json_reader.KeyTwice) as e:
        json_reader.loads(text)
    assert (e.value.key, e.value.line, e.value.column) == ("c", 3, 10)
    # escapes are read: "\u0061" is "a"
    with pytest.raises(json_reader.KeyTwice) as e:
        json_reader.loads('{"a": "}", "\\u0061": 2}')
    assert e.value.key == "a"


def test_json_without_keys_twice_reads_as_json_does():
    text = '{"a": [1, 2.5, -3, true, null, "x", {"b": {}}, []], "b": {"a": 1}}'
    assert json_reader.loads(text) == json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        json_reader.loads('{"a": 1,}')


def test_json_keeps_a_number_too_long_to_convert_apart():
    value = json_reader.loads('{"gpus": ' + "9" * 5000 + ', "n": -' + "1" * MAX_NUMBER_DIGITS + "}")
    long = value["gpus"]
    assert isinstance(long, json_reader.LongNumber) and str(long) == "a number of 5,000 digits"
    assert value["n"] == -int("1" * MAX_NUMBER_DIGITS)  # at the limit: a number


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", 42),
        (" 7 ", 7),
        ("²", None),  # "²".isdigit() is true; int("²") raises
        ("-3", None),
        ("1" * MAX_NUMBER_DIGITS, int("1" * MAX_NUMBER_DIGITS)),
        ("1" * (MAX_NUMBER_DIGITS + 1), None),
        ("9" * 5000, None),
        ("", None),
    ],
)
def test_whole_numbers_from_text(text, expected):
    assert parse_whole(text) == expected
