"""The fair queue on the pages (issue 18): the pools page counts the requests waiting per pool,
a pool's page lists those waiting for it (first in line first) with a cancel button, and *My
GPUs* shows a user their own with their position.

dev-pool (one node of 4 GPUs; group students guaranteed 2) is filled by alice (students, 2 GPUs)
and dave (2 GPUs, borrowed); then bob (students) and carol (no group) ask to wait. The truth of
what waits is the service's own ``GET api/v1/queue``, read through the client.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from needs import need, need_module
from service_kit import start_pod
from test_pages import Browser, text

from jupyter_gpupool.service.views import iso
from jupyter_gpupool.service.web.auth import ADMIN_SCOPE, USE_SCOPE
from jupyter_gpupool.service.web.pages.parts import standing_text

PREFIX = "/services/gpupool/"


async def fill_dev_pool(service: Any) -> None:
    """dev-pool's 4 GPUs in use: alice's 2 within the students' guarantee, dave's 2 borrowed."""
    admin, cluster = service.admin(), service.cluster
    for user, groups in (("alice", ["students"]), ("dave", [])):
        a = await admin.admit(user=user, groups=groups, pools=["dev-pool"], gpus=2)
        await start_pod(cluster, a, f"{user}-nb")
    await service.settled()


async def wait_in_line(service: Any, user: str, groups: list[str], gpus: int, server: str) -> str:
    """``user`` asks dev-pool for ``gpus`` GPUs, waiting in line; the request's id."""
    answer = await service.admin().request(
        "POST",
        "api/v1/admissions",
        json_body={
            "user": user,
            "groups": groups,
            "pools": ["dev-pool"],
            "gpus": gpus,
            "server": server,
            "queue": True,
        },
    )
    assert answer.code == 202, answer.json()
    return str(answer.json()["id"])


async def the_line(service: Any) -> list[dict[str, Any]]:
    """What waits, as the service's API says."""
    return list((await service.admin().queue())["queue"])


def browser(service: Any, user: str, groups: list[str] = (), admin: bool = False) -> Browser:
    scopes = [ADMIN_SCOPE] if admin else [USE_SCOPE]
    return Browser(service, service.hub.user(user, list(groups), scopes))


async def page(b: Browser, path: str) -> str:
    status, html, _ = await b.get(path)
    assert status == 200, (path, status, text(html)[:500])
    return html


def pool_row(html: str, pool: str) -> str:
    """The pools page's row of ``pool``."""
    return re.search(rf'<tr data-key="{pool}">.*?</tr>', html, re.S).group(0)


def waiting_badge(row: str) -> str | None:
    """The text of a pool row's "N waiting" badge, or None when it is hidden."""
    badge = re.search(r'<a [^>]*data-format="waiting"[^>]*>([^<]*)</a>', row)
    assert badge is not None, row
    return None if " hidden" in badge.group(0).split(">", 1)[0] else badge.group(1)


def pending_starts(row: str) -> str:
    """The words of a pool row's *Pending starts* cell."""
    cell = re.search(r'<td[^>]*>(?:<span[^>]*>)?<span data-field="admissions">.*?</td>', row, re.S)
    assert cell is not None, row
    return " ".join(text(cell.group(0)).split())


def queue_rows(html: str, table: str) -> list[list[str]]:
    """The words of each row of a queue table (``id``), in page order, the cells apart."""
    body = re.search(rf'<table [^>]*id="{table}".*?<tbody[^>]*>(.*?)</tbody>', html, re.S)
    assert body is not None, table
    rows = re.findall(r"<tr data-key=[^>]*>(.*?)</tr>", body.group(1), re.S)
    return [
        [text(visible(c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in rows
    ]


def visible(html: str) -> str:
    """``html`` without its hidden elements (what a reader sees)."""
    return re.sub(r"<(\w+)\s[^>]*\bhidden\b[^>]*>.*?</\1>", "", html, flags=re.S)


def shown(html: str, element_id: str) -> bool:
    """Whether the element ``element_id`` is shown (not ``hidden``)."""
    tag = re.search(rf'<[a-z]+ [^>]*id="{element_id}"[^>]*>', html)
    assert tag is not None, element_id
    return not re.search(r"\shidden(\s|>|=)", tag.group(0))


def expected_cells(row: dict[str, Any], with_user: bool = True) -> list[str]:
    """The cells a queue table shows for an entry of ``GET api/v1/queue`` (the age apart)."""
    cells = [str(row["position"]), row["estimate_words"] or "-"]
    if with_user:
        cells.append(row["user"])
    cells += [row["server"] or "(default)", str(row["gpus"]), row["gpu_type"] or "-"]
    cells += [", ".join(row["pools"]), standing_text(row)]
    return cells


def check_rows(shown_rows: list[list[str]], line: list[dict[str, Any]], with_user: bool) -> None:
    """Each page row reads as its entry of the API: the same cells, an age, the reasons."""
    assert len(shown_rows) == len(line)
    for cells, entry in zip(shown_rows, line, strict=True):
        n = len(expected_cells(entry, with_user))
        assert cells[:n] == expected_cells(entry, with_user)
        assert re.fullmatch(r"\d+s", cells[n]), cells  # waiting for seconds, kubectl's AGE
        assert cells[n + 1] == entry["reasons"] and entry["reasons"], cells


async def test_the_pages_show_who_waits_in_line_for_which_pool(service):
    """The pools page counts the line per pool; dev-pool's page lists its entries first in
    line first, as the API orders them, with their words; *My GPUs* shows each user their own
    with their position; pools nobody waits for say so."""
    await fill_dev_pool(service)
    bob = await wait_in_line(service, "bob", ["students"], 2, "big")
    carol = await wait_in_line(service, "carol", [], 1, "")
    line = await the_line(service)
    # fair share: carol's subject (user carol) uses none of its guarantee, the students all of
    # theirs: carol is first although she came second
    assert [(r["id"], r["position"]) for r in line] == [(carol, 1), (bob, 2)]
    assert [standing_text(r) for r in line] == ["over quota (user carol)", "over quota (group students)"]  # fmt: skip
    admin = browser(service, "admin", admin=True)

    pools = await page(admin, "pools")
    assert waiting_badge(pool_row(pools, "dev-pool")) == "2 waiting"
    assert f'href="{PREFIX}pools/dev-pool#queue"' in pool_row(pools, "dev-pool")
    # the pending starts count them beside the admissions held, and say so
    assert pending_starts(pool_row(pools, "dev-pool")) == "0 held · 2 in line"
    heading = re.search(r'<th [^>]*title="([^"]*)"[^>]*>Pending starts</th>', pools)
    assert heading is not None and "in line, waiting for GPUs" in heading.group(1)
    servers = re.search(r'<th [^>]*title="([^"]*)"[^>]*>Servers</th>', pools)
    assert servers is not None and "starts with no pod are under Pending starts" in servers.group(1)
    for other in ("training-pool", "inference-pool", "default"):
        assert waiting_badge(pool_row(pools, other)) is None
        assert "waiting" not in text(pool_row(pools, other))
        assert pending_starts(pool_row(pools, other)) == "0 held · 0 in line"
    # the live refresh reads the same count from the queue's answer
    assert f'data-map="{PREFIX}api/v1/queue" data-map-key="pools" data-map-as="waiting"' in pools

    dev = await page(admin, "pools/dev-pool")
    rows = queue_rows(dev, "queue-table")
    check_rows(rows, line, with_user=True)
    assert [r[2] for r in rows] == ["carol", "bob"]
    # no ledger in this service, so no history: the estimate says so rather than guess
    assert rows[1][:8] == [
        "2", "no estimate yet", "bob", "big", "2", "-", "dev-pool", "over quota (group students)"
    ]  # fmt: skip
    assert all(r[-1] == "Cancel" for r in rows)
    assert not shown(dev, "no-queue")
    assert 'data-where="pools" data-where-has="dev-pool"' in dev
    training = await page(admin, "pools/training-pool")
    assert queue_rows(training, "queue-table") == []
    assert shown(training, "no-queue")
    assert "No request waits in line for this pool." in text(training)

    # each user: their own entry and position, nobody else's
    for user, groups, entry in (("bob", ["students"], line[1]), ("carol", [], line[0])):
        mine = await page(browser(service, user, groups), "")
        assert shown(mine, "my-queue") and not shown(mine, "no-queue")
        check_rows(queue_rows(mine, "my-queue"), [entry], with_user=False)
    erin = await page(browser(service, "erin", ["students"]), "")
    assert queue_rows(erin, "my-queue") == [] and not shown(erin, "my-queue")
    assert shown(erin, "no-queue") and "No request of yours waits in line." in text(erin)


async def test_an_admin_cancels_a_request_waiting_in_line_from_the_pool_page(service):
    """The cancel button takes the request out of the line (the API then lists only the
    other, first now), says so and logs it; a second click, a request of another pool or an
    unknown one change nothing; a user may not cancel from the page."""
    await fill_dev_pool(service)
    bob = await wait_in_line(service, "bob", ["students"], 2, "big")
    carol = await wait_in_line(service, "carol", [], 1, "")
    admin = browser(service, "admin", admin=True)
    dev = await page(admin, "pools/dev-pool")
    form = re.search(rf'<form [^>]*>(?:(?!</form>).)*value="{bob}".*?</form>', dev, re.S).group(0)
    assert f'action="{PREFIX}pools/dev-pool"' in form and 'name="cancel"' in form
    assert 'name="_xsrf"' in form and f'name="next" value="{PREFIX}pools/dev-pool"' in form

    status, _, headers = await admin.post(
        "pools/dev-pool", {"cancel": bob, "next": f"{PREFIX}pools/dev-pool"}
    )
    assert (status, headers["Location"]) == (302, f"{PREFIX}pools/dev-pool")
    assert [(r["id"], r["position"]) for r in await the_line(service)] == [(carol, 1)]
    assert (await service.admin().admission(bob))["state"] == "cancelled"
    after = text(await page(admin, "pools/dev-pool"))
    assert "Cancelled bob's request for 2 GPUs (server big) waiting in line for dev-pool." in after
    assert [r[2] for r in queue_rows(await page(admin, "pools/dev-pool"), "queue-table")] == [
        "carol"
    ]
    assert service.ctx.changes.latest()[0].what == (
        "cancelled bob's request for 2 GPUs (server big) waiting in line for dev-pool"
    )
    assert waiting_badge(pool_row(await page(admin, "pools"), "dev-pool")) == "1 waiting"

    # too late: it says what became of it
    status, _, _ = await admin.post("pools/dev-pool", {"cancel": bob})
    assert status == 302
    assert "That request no longer waits in line: it was cancelled." in text(
        await page(admin, "pools/dev-pool")
    )
    # not this pool's, or no such request: 404, and carol still waits
    for path, form in (("pools/training-pool", {"cancel": carol}), ("pools/dev-pool", {"cancel": "nope"})):  # fmt: skip
        status, html, _ = await admin.post(path, form)
        assert status == 404 and "waits in line for" in text(html), (path, text(html)[:300])
    user = browser(service, "carol", [])
    status, html, _ = await user.post("pools/dev-pool", {"cancel": carol})
    assert status == 403 and "needs the custom:gpupool:admin scope" in text(html)
    assert [r["id"] for r in await the_line(service)] == [carol]

    status, _, _ = await admin.post("pools/dev-pool", {"cancel": carol})
    assert status == 302 and await the_line(service) == []
    dev = await page(admin, "pools/dev-pool")
    assert queue_rows(dev, "queue-table") == [] and shown(dev, "no-queue")
    assert waiting_badge(pool_row(await page(admin, "pools"), "dev-pool")) is None
    mine = await page(browser(service, "carol", []), "")
    assert not shown(mine, "my-queue") and shown(mine, "no-queue")


NODE = shutil.which("node")
SCRIPT = Path(__file__).resolve().parents[4] / "jupyter_gpupool/service/web/pages/static/gpupool.js"
# The line's helpers of the page script, called on the cases given.
RUNNER = r"""
const src = require("fs").readFileSync(process.argv[1], "utf8");
const start = src.indexOf("  function standing(");
const end = src.indexOf("  function keyOf(");
const f = new Function(src.slice(start, end) + "; return {standing, waiting, isoSeconds};")();
const cases = JSON.parse(process.argv[2]);
console.log(JSON.stringify({
  standing: cases.standing.map(([w, s]) => f.standing(w, s)),
  waiting: cases.waiting.map((n) => f.waiting(n)),
  iso: cases.iso.map((t) => f.isoSeconds(t)),
}));
"""


def test_the_pages_script_words_the_line_as_the_server_does():
    """A refreshed queue row and pool badge read as the first ones did."""
    need(NODE, "node (runs the pages' script)")
    cases: dict[str, list[Any]] = {
        "standing": [[True, "group students"], [False, "user dave"], [False, ""], [True, None]],
        "waiting": [0, 1, 12],
        "iso": [1_800_000_000.0, 1_800_000_059.75],
    }
    run = subprocess.run(
        [NODE or "node", "-e", RUNNER, str(SCRIPT), json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(run.stdout) == {
        "standing": [
            standing_text({"within_quota": w, "subject": s}) for w, s in cases["standing"]
        ],
        "waiting": ["", "1 waiting", "12 waiting"],
        "iso": [iso(t) for t in cases["iso"]],
    }


CHROMIUM = os.environ.get("GPUPOOL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = os.path.exists(CHROMIUM)
#: As tests/pages/browser_setup.py launches it (the network here is closed).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


async def refreshed(page: Any) -> None:
    """Once the page's script has refreshed it again (its stamp, cleared here, is set anew)."""
    await page.locator("[data-updated]").evaluate("e => (e.textContent = 'waiting')")
    await page.wait_for_function(
        "document.querySelector('[data-updated]').textContent !== 'waiting'"
    )


async def test_the_pages_stay_current_as_the_line_moves(service):
    """In a browser, without reloading: the pools page's count, the pool page's rows and a
    user's own entry follow the line as requests join and leave it (the pages' script); a
    pool nobody waits for, and an admin's own page, stay empty."""
    need(HAVE_CHROMIUM, "Chromium (apt-get install chromium; scripts/test.sh does)")
    api = need_module("playwright.async_api", "the browser tests need the playwright package")
    expect = api.expect
    expect.set_options(timeout=30_000)  # a refresh every 5 s, on a loaded machine
    await fill_dev_pool(service)
    bob = await wait_in_line(service, "bob", ["students"], 2, "big")
    carol = await wait_in_line(service, "carol", [], 1, "")
    tokens = {
        "admin": service.hub.user("admin", [], [ADMIN_SCOPE]),
        "bob": service.hub.user("bob", ["students"], [USE_SCOPE]),
    }
    opened = (
        ("admin", "pools"),
        ("admin", "pools/dev-pool"),
        ("admin", "pools/training-pool"),
        ("admin", ""),
        ("bob", ""),
    )
    async with api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pages = {}
            for who, path in opened:
                context = await chromium.new_context(
                    extra_http_headers={"Authorization": f"token {tokens[who]}"}
                )
                context.set_default_timeout(20_000)
                pages[who, path] = page = await context.new_page()
                assert (await page.goto(service.url + path)).status == 200, (who, path)
            badge = pages["admin", "pools"].locator(
                '#pools tr[data-key="dev-pool"] [data-format="waiting"]'
            )
            rows = pages["admin", "pools/dev-pool"].locator("#queue-table tbody tr")
            mine = pages["bob", ""].locator("#my-queue tbody tr")
            await expect(badge).to_have_text("2 waiting")
            await expect(rows).to_have_count(2)
            await expect(mine).to_have_count(1)
            await expect(mine.locator('[data-field="position"]')).to_have_text("2")

            # carol leaves, then erin joins: the count, the rows and bob's position follow
            await service.admin().release(carol)
            await expect(badge).to_have_text("1 waiting")
            await expect(rows).to_have_count(1)
            await expect(mine.locator('[data-field="position"]')).to_have_text("1")
            erin = await wait_in_line(service, "erin", ["students"], 1, "small")
            await expect(badge).to_have_text("2 waiting")
            erin_row = next(r for r in await the_line(service) if r["id"] == erin)
            assert erin_row["position"] == 2  # behind bob: the same subject, first come first
            await expect(rows.nth(1)).to_have_attribute("data-key", erin)
            await expect(rows).to_have_count(2)
            new = rows.nth(1)
            await expect(new.locator('[data-field="user"]')).to_have_text("erin")
            await expect(new.locator('[data-field="position"]')).to_have_text("2")
            await expect(new.locator('[data-format="standing"]')).to_have_text(
                standing_text(erin_row)
            )
            await expect(new.locator('[data-format="since"]')).to_have_text(re.compile(r"^\d+s$"))
            await expect(new.locator('[data-field="reasons"]')).to_have_text(erin_row["reasons"])
            await expect(new.locator('input[name="cancel"]')).to_have_value(erin)
            await expect(mine).to_have_count(1)  # bob's own only
            # nobody waits for training-pool, and the admin has no entry of their own
            for key in (("admin", "pools/training-pool"), ("admin", "")):
                await refreshed(pages[key])
            training = pages["admin", "pools/training-pool"]
            await expect(training.locator("#queue-table tbody tr")).to_have_count(0)
            await expect(training.locator("#no-queue")).to_be_visible()
            await expect(pages["admin", ""].locator("#my-queue")).to_be_hidden()

            # the line empties: the badge goes, the empty states show
            await service.admin().release(bob)
            await service.admin().release(erin)
            await expect(badge).to_be_hidden()
            await expect(rows).to_have_count(0)
            await expect(pages["admin", "pools/dev-pool"].locator("#no-queue")).to_be_visible()
            await expect(pages["bob", ""].locator("#my-queue")).to_be_hidden()
            await expect(pages["bob", ""].locator("#no-queue")).to_be_visible()
        finally:
            expect.set_options(timeout=5_000)  # playwright's default, for whoever comes next
            await chromium.close()
