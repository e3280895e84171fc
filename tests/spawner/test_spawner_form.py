"""The spawn form: status words, quota words, GPU choices, and the rendered HTML round trip."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from needs import need

from jupyter_gpupool.core.words.launch_options import (
    Catalog,
    PoolChoice,
    gpu_choices,
    pool_status,
    quota_text,
)
from jupyter_gpupool.spawner.form import form_context, render_form
from jupyter_gpupool.spawner.options import (
    SpawnOptions,
    form_to_user_options,
    parse_user_options,
)

GPU_POOL = PoolChoice(
    name="training-pool",
    description="Large <b>model</b> training",
    gpu_types=("A100-80G",),
    gpu_total=16,
    gpu_available=12,
    largest_free_block=8,
    largest_node_gpus=8,
    node_count=2,
    schedulable_nodes=2,
    quota_managed=True,
    borrowing=True,
    within_quota=4,
    quota_available=8,
)
CPU_POOL = PoolChoice(name="compute-pool", node_count=2, schedulable_nodes=2)
DEV_POOL = PoolChoice(
    name="dev-pool",
    gpu_types=("RTX4090-24G",),
    gpu_total=4,
    gpu_available=4,
    largest_free_block=4,
    largest_node_gpus=4,
    node_count=1,
    schedulable_nodes=1,
    allowed_gpus=(1, 2),
)
CATALOG = Catalog(pools=(CPU_POOL, DEV_POOL, GPU_POOL), default_pools=("training-pool",))


def with_(pool: PoolChoice, **changes) -> PoolChoice:
    return PoolChoice(**{**pool.__dict__, **changes})


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (GPU_POOL, ("free", "free")),
        (with_(GPU_POOL, largest_free_block=0, gpu_available=0), ("full", "full")),
        (
            with_(GPU_POOL, within_quota=0),
            ("borrowing", "borrowing possible (may be reclaimed)"),
        ),
        (
            with_(GPU_POOL, within_quota=0, quota_available=0),
            ("quota-used", "your quota is used up"),
        ),
        (
            with_(GPU_POOL, schedulable_nodes=1, status="degraded"),
            ("not-ready", "free; 1 of 2 nodes not ready"),
        ),
        (
            with_(GPU_POOL, schedulable_nodes=0, status="unavailable"),
            ("not-ready", "nodes not ready"),
        ),
        (CPU_POOL, ("cpu", "CPU only")),
        (PoolChoice(name="empty"), ("empty", "no nodes")),
    ],
)
def test_pool_status_words(pool, expected):
    assert pool_status(pool) == expected


def test_quota_words():
    assert quota_text(GPU_POOL) == "4 within quota, 8 with borrowing"
    assert quota_text(with_(GPU_POOL, within_quota=1, quota_available=1)) == "1 GPU within quota"
    assert quota_text(CPU_POOL) == "no quota"


def test_gpu_choices_are_what_some_pool_allows():
    assert gpu_choices(CATALOG) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert gpu_choices(Catalog(pools=(CPU_POOL, DEV_POOL))) == [0, 1, 2]


class Fields(HTMLParser):
    """The form's submittable fields, as a browser without JavaScript would send them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, list[str]] = {}
        self.options: dict[str, list[str]] = {}
        self.texts: list[str] = []
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "radio":
            if "checked" in a:  # a browser sends the chosen one only
                self.fields[a["name"]] = [a.get("value") or ""]
        elif tag == "input" and a.get("name") and a.get("type") != "checkbox":
            self.fields.setdefault(a["name"], []).append(a.get("value") or "")
        elif tag == "select":
            self._select = a["name"]
            self.options[self._select] = []
        elif tag == "option" and self._select:
            self.options[self._select].append(a["value"])
            if "selected" in a:
                self.fields[self._select] = [a["value"]]

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None

    def handle_data(self, data):
        if data.strip():
            self.texts.append(data.strip())


def submitted(html: str) -> Fields:
    parser = Fields()
    parser.feed(html)
    return parser


def test_the_rendered_form_submits_the_defaults_back_without_javascript():
    chosen = SpawnOptions(("dev-pool", "training-pool"), 2, "A100-80G")
    html = render_form(form_context(CATALOG, chosen))
    form = submitted(html)
    assert form.fields == {
        "priority.dev-pool": ["1"],
        "priority.training-pool": ["2"],
        "priority.compute-pool": [""],
        "gpus": ["2"],
        "gpu_type": ["A100-80G"],
        "queue": ["off"],  # the hidden half of the "wait in line" checkbox, left unticked
    }
    assert form.options["gpus"] == [str(n) for n in range(9)]
    assert form.options["gpu_type"] == ["", "A100-80G", "RTX4090-24G"]
    options = form_to_user_options(form.fields)
    assert parse_user_options(options, CATALOG) == chosen
    # what the user reads, escaped
    assert "4 within quota, 8 with borrowing" in form.texts and "12 / 16" in form.texts
    assert "Large &lt;b&gt;model&lt;/b&gt; training" in html
    # keyboard operable ordering for browsers with JavaScript
    assert 'aria-label="Move training-pool up"' in html and 'class="gpupool-use"' in html


class Classes(HTMLParser):
    """Every CSS class the markup uses, and the classes of each element by id."""

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()
        self.by_id: dict[str, set[str]] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        self.used |= classes
        if a.get("id"):
            self.by_id[a["id"]] = classes


def test_the_form_is_styled_by_the_hubs_bootstrap_5():
    # The hub's pages (JupyterHub >= 5) carry Bootstrap 5 in style.min.css. Bootstrap 3's classes
    # style nothing there: the order buttons looked like bare arrows, the GPU selects like text
    # fields, and the screen-reader announcement showed on the page.
    from jupyterhub._data import DATA_FILES_PATH

    css_file = Path(DATA_FILES_PATH) / "static" / "css" / "style.min.css"
    need(css_file.exists(), f"JupyterHub's stylesheet {css_file}")
    defined = set(re.findall(r"\.(-?[_a-zA-Z][\w-]*)", css_file.read_text()))
    parsed = Classes()
    parsed.feed(render_form(form_context(CATALOG, SpawnOptions(("training-pool",)))))
    ours = {c for c in parsed.used if c.startswith("gpupool-")}
    assert sorted(parsed.used - ours - defined) == []
    assert "visually-hidden" in parsed.by_id["gpupool-announce"]
    assert "form-select" in parsed.by_id["gpupool-gpus"]
    assert "form-select" in parsed.by_id["gpupool-gpu-type"]


def test_a_gpu_count_no_pool_offers_falls_back_to_the_nearest():
    ctx = form_context(Catalog(pools=(CPU_POOL, DEV_POOL)), SpawnOptions((), 7))
    assert ctx["gpus"] == 2


def test_kubespawner_profiles_sit_beside_the_pools():
    html = render_form(form_context(CATALOG, SpawnOptions(), profile_form="<p id=prof>x</p>"))
    assert '<div class="gpupool-profiles"><p id=prof>x</p></div>' in html


def test_an_admin_can_override_the_template(tmp_path):
    (tmp_path / "gpupool_form.html").write_text(
        "{% for row in rows %}<input name='{{ row.field }}' value='{{ row.priority or '' }}'>"
        "{% endfor %}<i>{{ user }}</i>"
    )
    html = render_form(
        form_context(CATALOG, SpawnOptions(("training-pool",)), user="<alice>"),
        search_path=[str(tmp_path)],
    )
    assert html == (
        "<input name='priority.training-pool' value='1'><input name='priority.compute-pool' "
        "value=''><input name='priority.dev-pool' value=''><i>&lt;alice&gt;</i>"
    )
    (tmp_path / "mine.html").write_text("mine {{ gpus }}")
    assert (
        render_form(
            form_context(CATALOG, SpawnOptions()), template="mine.html", search_path=[str(tmp_path)]
        )
        == "mine 0"
    )


def test_the_form_shows_what_is_left_of_each_budget_and_which_is_spent():
    options = {
        "pools": [],
        "budgets": [
            {
                "subject": "user:alice",
                "gpu_hours": 100,
                "window": "30d",
                "pools": [],
                "spent": 87.5,
                "remaining": 12.5,
                "back_at": None,
            },
            {
                "subject": "group:ml",
                "gpu_hours": 1000,
                "window": "7d",
                "pools": ["training-pool"],
                "spent": 1000.2,
                "remaining": 0,
                "back_at": 1_800_000_000,
            },
        ],
    }
    catalog = Catalog(
        pools=CATALOG.pools,
        default_pools=CATALOG.default_pools,
        budgets=Catalog.from_json(options).budgets,
    )
    html = render_form(form_context(catalog, SpawnOptions()))
    items = re.findall(r'<li class="gpupool-budget( gpupool-budget-spent)?">([^<]*)</li>', html)
    assert items == [
        ("", "alice: 12.5 of 100 GPU-hours left (per 30 days)"),
        (
            " gpupool-budget-spent",
            "group ml: budget of 1000 GPU-hours per 7 days in training-pool is spent; "
            "hours come back from 2027-01-15 08:00 UTC",
        ),
    ]
    # no budgets: no such part of the form
    assert "gpupool-budgets" not in render_form(form_context(CATALOG, SpawnOptions()))
