"""The admins' health page (``{prefix}health``, issue 40): the same rows as ``gpupool get health``
prints, each problem in a sentence, linked from every admin page, and for admins only.

The truth is the CLI's own output (a separate process' view of ``GET api/v1/health``) and a loop
broken by the test itself."""

from __future__ import annotations

import asyncio
import re
from html import unescape
from typing import Any

import pytest
from test_health import _degraded, _ok
from test_pages import Browser, admin, alice, text  # noqa: F401 - the fixtures
from waiting import async_wait_for

from jupyter_gpupool.cli import main

pytestmark = pytest.mark.asyncio


def table(html: str) -> tuple[list[str], dict[str, list[str]]]:
    """The health table's headings, and its cells per row (by its first cell, the part)."""
    found = re.search(r'<table[^>]*id="health".*?</table>', html, re.S)
    assert found, text(html)[:600]
    headings = [text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", found.group(0), re.S)]
    rows = {}
    for row in re.findall(r"<tr data-key[^>]*>(.*?)</tr>", found.group(0), re.S):
        cells = [
            " ".join(unescape(text(c)).split())
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        rows[cells[0]] = cells
    return headings, rows


def problems(html: str) -> list[str]:
    found = re.search(r'<ul[^>]*id="health-problems">(.*?)</ul>', html, re.S)
    return (
        [
            " ".join(unescape(text(li)).split())
            for li in re.findall(r"<li>(.*?)</li>", found.group(1), re.S)
        ]
        if found
        else []
    )


def printed(service: Any, capsys: Any) -> tuple[int, list[str], dict[str, list[str]]]:
    """``gpupool get health``'s exit status, headings and rows (split at two spaces or more)."""
    connect = ["--url", service.url, "--token", service.hub.admin()]
    status = main(["get", "health", *connect])
    out, _ = capsys.readouterr()
    lines = [line for line in out.splitlines() if line and not line.startswith(("status:", "- "))]
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return status, header, {row[0]: row for row in rows}


async def test_the_health_page_shows_what_gpupool_get_health_prints(service, admin, capsys):  # noqa: F811
    await async_wait_for(lambda: _ok(service.admin()), what="the health to say ok", timeout=10)
    status, html, _ = await admin.get("health")
    assert status == 200
    assert "Every part works: no problem." in text(html)
    headings, rows = table(html)
    code, header, cli_rows = await asyncio.to_thread(printed, service, capsys)
    assert code == 0
    assert [h.upper() for h in headings] == header
    assert list(rows) == list(cli_rows)
    assert {"watch nodes", "watch pods", "loop admission.sweep"} <= set(rows)
    moving = ("LAST", "RUNS")
    for part, cells in rows.items():
        # the same words; a loop's rounds and age may have moved on between the two reads
        same = [c for i, c in enumerate(cells) if headings[i] not in ("Last", "Runs")]
        assert same == [c for i, c in enumerate(cli_rows[part]) if header[i] not in moving], part


async def test_a_broken_loop_is_a_sentence_on_the_health_page(service, admin):  # noqa: F811
    def broken() -> list[Any]:
        raise RuntimeError("the sweep broke")

    service.ctx.desk.sweep = broken
    answer = await async_wait_for(
        lambda: _degraded(service.admin()), what="the health to say degraded", timeout=10
    )
    status, html, _ = await admin.get("health")
    assert status == 200
    said = problems(html)
    assert "Loop admission.sweep failed its last round: RuntimeError: the sweep broke." in said, (
        said
    )
    assert len(said) >= len(answer["problems"]) >= 1
    _, rows = table(html)
    assert rows["loop admission.sweep"][-1] == "RuntimeError: the sweep broke"
    assert "Every part works" not in text(html)


async def test_every_admin_page_links_to_the_health_page_and_users_get_none(
    service,
    admin,  # noqa: F811
    alice,  # noqa: F811
):
    for path in ("pools", "nodes", "quotas", "idle", "bookings", "admin", "health"):
        status, html, _ = await admin.get(path)
        assert status == 200, path
        nav = re.search(r'<nav class="nav[^"]*gpupool-subnav".*?</nav>', html, re.S)
        assert nav and 'href="/services/gpupool/health"' in nav.group(0), path
    status, html, _ = await alice.get("health")
    assert status == 403
    status, html, _ = await alice.get("")
    assert status == 200 and "gpupool-subnav" not in html
