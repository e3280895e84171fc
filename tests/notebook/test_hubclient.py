"""The hub's progress stream, parsed (pure), and the hub client's paths."""

from __future__ import annotations

from jupyter_gpupool.hubclient import parse_event_stream, server_path


def test_events_are_parsed_when_complete_and_the_rest_is_kept():
    events, rest = parse_event_stream(
        'data: {"progress": 10, "message": "a"}\n\n: a comment\n\ndata: {"progress": 5'
    )
    assert events == [{"progress": 10, "message": "a"}]
    assert rest == 'data: {"progress": 5'
    events, rest = parse_event_stream(rest + "0}\r\n\r\n")
    assert (events, rest) == ([{"progress": 50}], "")


def test_data_that_is_not_json_is_a_message():
    events, _ = parse_event_stream("data: hello\ndata: there\n\ndata: [1]\n\n")
    assert events == [{"message": "hello\nthere"}, {"message": "[1]"}]


def test_server_paths():
    assert server_path("alice", "") == "users/alice/server"
    assert server_path("a@b.org", "my gpu") == "users/a%40b.org/servers/my%20gpu"
