"""The spawn form in a browser (Chromium): once a part of a GPU (a MIG instance) is picked in a
pool that is used, the GPU count offers 1 at most (issue 40), as the spawner's options allow
(``spawner/options.py``: a shape other than whole GPUs is one unit per server); whole GPUs
picked again, the whole range comes back.

The form is the spawner's own rendering (``render_form``) of a catalog with a MIG pool beside a
pool of whole GPUs, loaded into the page; what is checked is what a person can choose in it.
"""

from __future__ import annotations

from browser_setup import chromium, expect, new_page

from jupyter_gpupool.core.words.launch_options import Catalog, PoolChoice
from jupyter_gpupool.core.words.shape_choice import ShapeChoice
from jupyter_gpupool.spawner.form import form_context, render_form
from jupyter_gpupool.spawner.options import SpawnOptions, form_to_user_options

WHOLE = ShapeChoice("whole", model="A100-80G", text="A100-80G whole: 8 free", free=8)
MIG_1G = ShapeChoice(
    "mig-1g.10gb", kind="mig", model="A100-80G", text="MIG 1g.10gb: 2 free", free=2
)
TRAINING = PoolChoice(
    name="training-pool",
    gpu_types=("A100-80G",),
    gpu_total=8,
    gpu_available=8,
    largest_free_block=8,
    largest_node_gpus=8,
    node_count=2,
    schedulable_nodes=2,
    shapes=(WHOLE, MIG_1G),
)
DEV = PoolChoice(
    name="dev-pool",
    gpu_types=("RTX4090-24G",),
    gpu_total=4,
    gpu_available=4,
    largest_free_block=4,
    largest_node_gpus=4,
    node_count=1,
    schedulable_nodes=1,
)
CATALOG = Catalog(pools=(TRAINING, DEV), default_pools=("training-pool",))


def enabled_counts(page) -> list[str]:
    return page.eval_on_selector_all(
        "#gpupool-gpus option", "os => os.filter(o => !o.disabled).map(o => o.value)"
    )


def test_a_mig_instance_picked_limits_the_gpu_count_to_one():
    html = render_form(form_context(CATALOG, SpawnOptions(("training-pool",), 4)))
    with chromium() as browser:
        page = new_page(browser)
        page.set_content(f'<form id="spawn_form">{html}</form>')
        gpus = page.locator("#gpupool-gpus")
        assert enabled_counts(page) == [str(n) for n in range(9)]
        expect(gpus).to_have_value("4")
        page.get_by_label("MIG 1g.10gb: 2 free").check()
        assert enabled_counts(page) == ["0", "1"]
        expect(gpus).to_have_value("1")
        expect(page.locator("#gpupool-gpus-part")).to_be_visible()
        # what the form sends the spawner is a request its options accept
        fields = page.eval_on_selector(
            "#spawn_form",
            "f => { const o = {}; new FormData(f).forEach((v, k) => "
            "(o[k] = o[k] || []).push(v)); return o; }",
        )
        options = form_to_user_options(fields)
        assert options["gpus"] == 1
        assert options["pools"][0] == {"pool": "training-pool", "shape": "mig-1g.10gb"}
        # whole GPUs again: the whole range
        page.get_by_label("A100-80G whole: 8 free").check()
        assert enabled_counts(page) == [str(n) for n in range(9)]
        expect(page.locator("#gpupool-gpus-part")).to_be_hidden()
        # a pool that is not used does not limit the count
        page.get_by_label("MIG 1g.10gb: 2 free").check()
        page.get_by_label("Use training-pool").uncheck()
        page.get_by_label("Use dev-pool").check()
        assert enabled_counts(page) == [str(n) for n in range(9)]
