"""The pages with servers of a shape (issue 29): a server's GPUs cell says what it has, quota
amounts in GPU-equivalents read with two decimals, the reports page splits by shape.

Servers are admitted through the API and scheduled by the simulator onto the node with the
device; what is checked is the page's text as a reader sees it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from service_kit import start_pod
from shaped_cluster import one_pool_dir, spec_of
from test_api_partitioned_shapes import NODES, POOL
from test_pages import Browser, text
from test_records import until

from jupyter_gpupool.service.web.auth import ADMIN_SCOPE
from jupyter_gpupool.sim import SimCluster

MIG = {"pool": POOL, "shape": "mig-3g.40gb"}


@pytest.fixture
def pools_dir(tmp_path: Path) -> Path:
    # each user: at most one GPU-equivalent here
    quota = {"borrowing": False, "user-default": {"guaranteed": 1, "limit": 1}}
    return one_pool_dir(tmp_path, POOL, quota=quota)


def row_text(html: str, table_id: str, key: str) -> str:
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S)
    assert table, f"no table #{table_id}: {text(html)[-600:]}"
    row = re.search(rf'<tr data-key="{re.escape(key)}">(.*?)</tr>', table.group(0), re.S)
    assert row, f"no row {key} in #{table_id}: {text(table.group(0))[:600]}"
    return text(row.group(1)).strip()


async def test_a_mig_server_reads_as_its_shape_and_its_quota_with_two_decimals(
    start_service, db_url, now
):
    spec = spec_of(NODES)
    async with SimCluster(spec, clock=lambda: now[0]) as cluster:
        service = await start_service(cluster, db_url=db_url, history_interval=3600)
        admission = await service.admin().admit(user="erin", groups=[], pools=[MIG], gpus=1)
        await start_pod(cluster, admission, "erin-nb")
        await until(db_url, "SELECT pod FROM server_sessions", lambda r: len(r) == 1, "a session")
        now[0] += 7 * 3600  # 3/7 for 7 h: 3 GPU-hours
        await pages(service)


async def pages(service) -> None:
    admin = Browser(service, service.hub.user("admin", [], [ADMIN_SCOPE]))
    try:
        status, html, _ = await admin.get(f"pools/{POOL}")
        assert status == 200
        assert row_text(html, "servers", "default/erin-nb").startswith(
            "erin (default) MIG 3g.40gb of an A100-80G mig-node running"
        )
        status, html, _ = await admin.get("quotas")
        assert status == 200
        # guaranteed 1, limit 1, used 3/7, nothing held, nothing borrowed
        assert f"{POOL} user:erin 1 1 0.43 - 0" in text(html)
        assert "3/7" not in text(html)
        status, html, _ = await admin.get("reports?by=shape&since=7d")
        assert status == 200
        # the form offers the split, and the table's head names it
        assert '<option value="shape" selected>Shape</option>' in html
        assert "<th>Shape</th>" in html
        assert row_text(html, "report", "mig-3g.40gb").startswith("mig-3g.40gb 3.0 0.0 3.0 1")
    finally:
        admin.http.close()
