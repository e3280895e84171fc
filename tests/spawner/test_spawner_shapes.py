"""Choosing a shape on the spawn form (issue 29): the form lists each pool's shapes with free counts
and what each isolates, the choice becomes ``{"pool", "shape"}`` entries of ``user_options``, and
the spawner sends them to the service as they are.

The pools are the service's own answer for nodes the simulator makes from a cluster file
(tests/shaped_cluster.py): a MIG node with one GPU left whole, a time-sliced node, and a node all
in MIG instances (a pool with no whole GPUs).
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest
from shaped_cluster import shaped_state

from jupyter_gpupool.spawner.errors import OptionsError, SpawnRefused


def unticked(fields: dict[str, list[str]]) -> dict[str, list[str]]:
    """The form's fields with no pool chosen (the test chooses)."""
    return {k: v for k, v in fields.items() if not k.startswith("priority.")}


@pytest.fixture
def shaped_service(fake_service):
    fake_service.state = shaped_state()
    return fake_service


class Shapes(HTMLParser):
    """Per pool: its shape radios (value, checked); each label's text and each span's (the
    isolation words); and the fields a browser without JavaScript would send."""

    def __init__(self) -> None:
        super().__init__()
        self.radios: dict[str, list[tuple[str, bool]]] = {}
        self.texts: dict[str, str] = {}  # element id -> its text
        self.labels: dict[str, str] = {}  # input id -> its label's text
        self.fields: dict[str, list[str]] = {}
        self._for: str | None = None
        self._id: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "radio":
            self.radios.setdefault(a["name"], []).append((a["value"], "checked" in a))
            if "checked" in a:
                self.fields[a["name"]] = [a["value"]]
        elif tag == "input" and a.get("name") and a.get("type") != "checkbox":
            self.fields.setdefault(a["name"], []).append(a.get("value") or "")
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and "selected" in a:
            self.fields[self._select] = [a["value"]]
        elif tag == "label" and a.get("for"):
            self._for = a["for"]
        elif tag in ("span", "li") and a.get("id"):
            self._id = a["id"]

    def handle_endtag(self, tag):
        if tag == "label":
            self._for = None
        elif tag in ("span", "li"):
            self._id = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._for:
            self.labels[self._for] = self.labels.get(self._for, "") + data.strip()
        if self._id:
            self.texts[self._id] = self.texts.get(self._id, "") + data.strip()


async def test_the_form_lists_each_pools_shapes_with_free_counts_and_isolation(
    spawner, shaped_service
):
    page = await spawner.get_options_form()
    parsed = Shapes()
    parsed.feed(page)
    assert parsed.radios == {
        # the service's order: whole GPUs first (the default where there are any), then MIG
        # instances, then shared GPUs
        "shape.slice-pool": [("whole", True), ("mig-3g.40gb", False), ("shared-4", False)],
        # no whole GPUs here: its first shape is the default
        "shape.mig-pool": [("mig-1g.10gb", True)],
    }
    labels = list(parsed.labels.values())
    for text in (
        "A100-80G whole: 1 free (largest 1 on one node)",
        "MIG 3g.40gb: 2 free",
        "A10 shared ¼ (time-sliced, no memory isolation): 8 free",
        "MIG 1g.10gb: 7 free",
    ):
        assert text in labels
    # what each kind isolates is said once (three kinds, four shapes: two are MIG instances)
    said = re.findall(
        r'<li id="gpupool-isolates-([^"]+)"><b>([^<]+)</b> isolates ([^<]+)</li>', page
    )
    assert [(kind, words, html.unescape(isolates)) for kind, words, isolates in said] == [
        ("whole", "A whole GPU", "everything: the whole GPU is the server's"),
        (
            "mig",
            "A MIG instance",
            "memory and faults: its own memory and compute, and a crash stays inside it",
        ),
        (
            "shared-time-slicing",
            "A time-sliced GPU",
            "nothing: every server sees all the GPU's memory, and one crash ends them all",
        ),
    ]
    assert page.count("isolates memory and faults") == 1 + 2  # the list, and 2 shapes' tooltips
    # each radio is described by its kind's line (a screen reader hears it with the choice)
    described = re.findall(r'type="radio"[^>]*aria-describedby="gpupool-isolates-([^"]+)"', page)
    assert described == ["whole", "mig", "shared-time-slicing", "mig"]


async def test_a_shape_chosen_on_the_form_is_sent_to_the_service_as_a_pool_entry(
    spawner, shaped_service
):
    parsed = Shapes()
    parsed.feed(await spawner.get_options_form())
    form = {
        **unticked(parsed.fields),
        "priority.slice-pool": ["1"],
        "priority.mig-pool": ["2"],
        "shape.slice-pool": ["mig-3g.40gb"],
        "gpus": ["1"],
    }
    options = await spawner.run_options_from_form(form)
    assert options["pools"] == [
        {"pool": "slice-pool", "shape": "mig-3g.40gb"},
        {"pool": "mig-pool", "shape": "mig-1g.10gb"},
    ]
    assert options["gpus"] == 1
    # every pool full: the start fails with the service's 409, after the service got the
    # entries as the user chose them
    shaped_service.full = {"slice-pool", "mig-pool"}
    spawner.user_options = options
    with pytest.raises(SpawnRefused) as e:
        await spawner.start()
    assert e.value.status_code == 409
    [body] = shaped_service.admissions
    assert body["pools"] == [
        {"pool": "slice-pool", "shape": "mig-3g.40gb"},
        {"pool": "mig-pool", "shape": "mig-1g.10gb"},
    ]
    assert body["gpus"] == 1


async def test_whole_gpus_chosen_on_the_form_stay_plain_pool_names(spawner, shaped_service):
    parsed = Shapes()
    parsed.feed(await spawner.get_options_form())
    form = {**unticked(parsed.fields), "priority.slice-pool": ["1"], "gpus": ["1"]}
    options = await spawner.run_options_from_form(form)
    assert options["pools"] == ["slice-pool"]  # shape.slice-pool=whole is the plain name


async def test_more_than_one_unit_of_a_shape_is_refused_before_the_service_is_asked(
    spawner, shaped_service
):
    spawner.user_options = {
        "pools": [{"pool": "slice-pool", "shape": "mig-3g.40gb"}, "mig-pool"],
        "gpus": 2,
    }
    with pytest.raises(OptionsError) as e:
        await spawner.start()
    assert "mig-3g.40gb in slice-pool needs gpus 1, not 2" in e.value.message
    assert shaped_service.admissions == []


async def test_a_shape_the_pool_does_not_offer_is_refused_naming_its_shapes(
    spawner, shaped_service
):
    spawner.user_options = {"pools": [{"pool": "mig-pool", "shape": "shared-4"}], "gpus": 1}
    with pytest.raises(OptionsError) as e:
        await spawner.start()
    assert e.value.message == "mig-pool offers no shape 'shared-4'; its shapes: mig-1g.10gb"
    assert shaped_service.admissions == []
