"""The pure parts of the pages: usage history and chart, node pages, quota text, templates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jupyter_gpupool.core.usage.index import UsageIndex
from jupyter_gpupool.service.errors import ApiError
from jupyter_gpupool.service.records import changelog
from jupyter_gpupool.service.records.samples import Sample, UsageHistory
from jupyter_gpupool.service.web.nodetable import NodeQuery, page_of, parse_query, select
from jupyter_gpupool.service.web.pages import templating
from jupyter_gpupool.service.web.pages.admin import sentence
from jupyter_gpupool.service.web.pages.charts import usage_chart
from jupyter_gpupool.service.web.pages.user import quota_text

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core"))
from k8s_factories import node


def rows(used):
    return [{"name": "a", "gpu_used": used, "gpu_total": 8}, {"name": "b", "gpu_used": 1, "gpu_total": 4}]  # fmt: skip


def test_history_keeps_the_last_hours_per_pool():
    h = UsageHistory(interval=60, hours=1)
    assert h.maxlen == 61 and h.due(0)
    for i in range(100):
        h.sample(i * 60.0, rows(i % 8))
    series = h.series()
    assert len(series["a"]) == 61 and series["a"][-1] == Sample(99 * 60.0, 3, 8)
    assert not h.due(99 * 60.0 + 30) and h.due(100 * 60.0)
    # a pool that goes away keeps its past until it ages out
    h.sample(100 * 60.0, rows(0)[:1])
    assert "b" in h.series()
    h.sample(200 * 60.0, rows(0)[:1])
    assert "b" not in h.series()
    assert h.to_json()["pools"]["a"][-1] == [200 * 60.0, 0, 8]


def test_the_usage_chart_spans_the_hours_asked_with_its_data_where_it_lies():
    history = {
        "a": [Sample(t, t // 60, 8) for t in range(0, 3601, 600)],
        "b": [Sample(t, 1, 4) for t in range(0, 3601, 600)],
    }
    chart = usage_chart(history, now=3600, hours=6)
    assert not chart.empty
    names = [line.name for line in chart.lines]
    assert names == ["capacity", "all pools", "a", "b"]
    assert chart.lines[0].last == 12 and chart.lines[1].last == 60 + 1
    # y axis to the top value, x axis over the 6 hours asked, the hour of samples its last sixth
    assert chart.y_ticks[0][1] == "0" and int(chart.y_ticks[-1][1]) >= 61
    assert [label for _, label in chart.x_ticks] == [
        "now",
        "-1h",
        "-2h",
        "-3h",
        "-4h",
        "-5h",
        "-6h",
    ]
    assert chart.x_ticks[-1][0] == pytest.approx(chart.left)
    a = [tuple(map(float, p.split(","))) for p in chart.lines[2].points.split()]
    assert a[0][0] == pytest.approx(chart.left + 5 / 6 * chart.plot_width, abs=0.05)
    assert a[-1][0] == pytest.approx(chart.left + chart.plot_width)
    assert a[-1][1] < a[0][1]  # more GPUs in use: higher up
    many = {f"p{i}": [Sample(0, 1, 1)] for i in range(12)}
    lines = usage_chart(many, now=60, hours=1, max_lines=8).lines
    assert lines[-1].name == "4 other pools" and lines[-1].last == 4
    assert usage_chart({}, now=0, hours=6).empty


@pytest.fixture
def index():
    idx = UsageIndex()
    nodes = [node(f"n{i:03d}", f"pool-{i % 3}") for i in range(250)]
    nodes.append(node("sick", "pool-0", ready=False))
    idx.reset(nodes=nodes, pods=[])
    return idx


def test_node_pages_are_filtered_then_cut(index):
    page = select(index, NodeQuery(limit=100))
    assert (page.total, len(page.rows), page.number, page.pages) == (251, 100, 1, 3)
    assert page.rows[0].name == "n000"
    last = select(index, NodeQuery(limit=100, offset=10_000))  # past the end: the last page
    assert (last.offset, last.number, len(last.rows)) == (200, 3, 51)
    assert [n.name for n in select(index, NodeQuery(status="not-ready")).rows] == ["sick"]
    pool = select(index, NodeQuery(pool="pool-1", q="n00"))
    assert [n.name for n in pool.rows] == ["n001", "n004", "n007"]
    assert select(index, NodeQuery(pool="nope")).total == 0
    assert page_of(list(range(5)), 3, 2).rows == [2, 3]


def test_node_query_arguments_are_checked():
    args = {"status": "free", "q": " gpu ", "offset": "200", "limit": "5000"}
    q = parse_query(args.get, default_limit=100)
    assert (q.status, q.q, q.offset, q.limit) == ("free", "gpu", 200, 1000)
    assert parse_query({}.get, default_limit=100).limit == 100
    for bad in ({"status": "sleepy"}, {"offset": "-1"}, {"limit": "ten"}):
        with pytest.raises(ApiError) as e:
            parse_query(bad.get)
        assert e.value.status == 400


def test_a_users_quota_in_a_few_words():
    quota = {
        "users": {"alice": {"guaranteed": 2, "limit": None, "all_gpus": 3}},
        "groups": {"ml": {"guaranteed": 8, "limit": 16, "used": 5}},
    }
    assert quota_text(quota, "alice") == (
        "3 in use, 2 guaranteed, limit none; group ml: 5 in use of 8 guaranteed, limit 16"
    )
    assert quota_text(None, "alice") == "no quota: the whole pool"
    assert sentence("created pool x") == "Created pool x." and sentence("Done.") == "Done."


def test_changes_are_worded_once():
    assert changelog.applied_pools({"created": ["a"], "labeled_nodes": ["n1", "n2"]}) == (
        "created pool a; labelled nodes n1, n2"
    )
    deleted = {"deleted": "a", "unlabeled_nodes": ["n1"], "servers_still_running": [{}]}
    assert changelog.deleted_pool(deleted) == (
        "deleted pool a; nodes n1 back in default; 1 server(s) still running there"
    )
    assert changelog.labelled_node({"node": "n", "changed": {"k": None}}) == (
        "labelled node n: k removed"
    )
    log = changelog.ChangeLog(keep=2)
    for what in ("one", "two", "three"):
        log.record("user", "admin", what)
    assert [c.what for c in log.latest()] == ["three", "two"]


def test_pages_extend_the_hubs_page_or_a_stand_in(monkeypatch, tmp_path):
    env = templating.make_environment()
    assert "jupyterhub" in env.get_template("page.html").filename
    monkeypatch.setattr(templating, "hub_template_dir", lambda: None)
    env = templating.make_environment()
    assert env.get_template("page.html").filename.endswith("fallback/page.html")
    (tmp_path / "page.html").write_text("custom {% block main %}{% endblock %}")
    env = templating.make_environment([str(tmp_path)])
    ns = templating.hub_namespace(
        hub_prefix="/hub/", service_prefix="/services/gpupool/", user="a<b",
        scopes=[], xsrf_token="x",
    )  # fmt: skip
    html = env.get_template("error.html").render(
        **ns, svc="/s/", own_static=lambda p: p, status_code=404, reason="Not Found",
        message="<script>", caller=None, refresh_seconds=5, rendered_at="", version="",
    )  # fmt: skip
    assert html.startswith("custom") and "&lt;script&gt;" in html
    assert ns["static_url"]("css/style.min.css") == "/hub/static/css/style.min.css"
    assert ns["user"].json_escaped_name == "a<b" and ns["prefix"] == "/"
