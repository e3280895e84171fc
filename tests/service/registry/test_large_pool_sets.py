"""Large pool sets never stall the service: the number of pools is bounded (``max_pools``, a 400
past it, found before the whole body is read), a change parses each text once (never the whole
store again), and the work runs off the event loop, so admissions are answered meanwhile."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from jupyter_gpupool.client import GPUPoolError
from jupyter_gpupool.core.documents import yaml_reader
from jupyter_gpupool.service.registry import documents


def pools_body(count: int, prefix: str = "p") -> str:
    return "".join(
        f"---\nkind: pool\nversion: v0.1\npool: {{name: {prefix}-{i}}}\n" for i in range(count)
    )


async def test_more_pools_than_max_pools_is_a_400_and_nothing_changes(start_service, pools_dir):
    service = await start_service(max_pools=10)  # the test pools are 4
    admin = service.admin()
    files = {p.name: p.read_text() for p in pools_dir.iterdir()}
    parsed: list[int] = []
    real = yaml_reader.load_documents

    def counting(text, file="<string>", max_documents=None):
        docs = real(text, file, max_documents)  # raises past max_documents
        parsed.append(len(docs))
        return docs

    with pytest.MonkeyPatch.context() as m:
        m.setattr(documents, "load_documents", counting)
        with pytest.raises(GPUPoolError) as e:
            await admin.request(
                "POST", "api/v1/pools", text=pools_body(17661), content_type="application/yaml"
            )
    assert e.value.status == 400
    assert e.value.body["message"] == (
        "the request holds more than 10 documents; at most 10 are accepted "
        "(c.GPUPoolService.max_pools)"
    )
    assert parsed == []  # refused while reading the 11th document, not after all 17,661
    with pytest.raises(GPUPoolError) as e:
        await admin.request(
            "POST", "api/v1/pools", text=pools_body(7), content_type="application/yaml"
        )
    assert e.value.status == 400
    assert e.value.body["message"] == (
        "the change would make 11 pools; the service keeps at most 10 (c.GPUPoolService.max_pools)"
    )
    assert {p.name: p.read_text() for p in pools_dir.iterdir()} == files
    # up to the bound, and replacing pools that exist, is fine
    await admin.request("POST", "api/v1/pools", text=pools_body(6), content_type="application/yaml")
    await admin.request("POST", "api/v1/pools", text=pools_body(6), content_type="application/yaml")
    assert len(service.ctx.state.registry.pools) == 10


async def test_a_change_parses_its_own_texts_only(start_service, pools_dir):
    service = await start_service(max_pools=1000)
    admin = service.admin()
    await admin.request(
        "POST", "api/v1/pools", text=pools_body(300), content_type="application/yaml"
    )
    parsed: list[tuple[str, str]] = []
    real, real_written = yaml_reader.load_documents, yaml_reader.load_written_document

    def counting(text, file="<string>", max_documents=None):
        parsed.append(("checked", file))
        return real(text, file, max_documents)

    def counting_written(text, file):
        parsed.append(("written", file))
        return real_written(text, file)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(documents, "load_documents", counting)
        m.setattr(documents, "load_written_document", counting_written)
        await admin.request(
            "POST", "api/v1/pools", text=pools_body(1, "one"), content_type="application/yaml"
        )
    # the body, checked, and the one file written for it; not the 304 files already loaded
    assert parsed == [("checked", "<request>"), ("written", str(pools_dir / "one-0.yaml"))]
    assert len(service.ctx.state.registry.pools) == 305


async def test_admissions_are_answered_while_a_change_is_worked_out(start_service, monkeypatch):
    service = await start_service()
    slow_started = threading.Event()
    real = documents.upsert_pools

    def slow(*args, **kw):
        slow_started.set()
        time.sleep(2)  # a change that takes its time, wherever it runs
        return real(*args, **kw)

    monkeypatch.setattr(documents, "upsert_pools", slow)
    # timed from the change's request: a service that works it out in its event loop (the
    # test's too) answers the admission only after the change's 2 s
    t0 = time.perf_counter()
    change = asyncio.ensure_future(
        service.admin().request(
            "POST", "api/v1/pools", text=pools_body(3), content_type="application/yaml"
        )
    )
    assert await asyncio.to_thread(slow_started.wait, 10)
    admitted = await service.user("dave").admit(pools=["dev-pool"], gpus=1)
    waited = time.perf_counter() - t0
    assert admitted["pool"] == "dev-pool"
    assert waited < 1.5, f"the admission waited {waited:.2f} s for the change"
    assert not change.done()
    await change
    assert "p-2" in service.ctx.state.registry.pools


@pytest.mark.parametrize("syncfs", ["syncfs", "an fsync per file"])
def test_many_files_are_written_whole_and_nothing_else_is_left(tmp_path, monkeypatch, syncfs):
    """A change of many files (synced together) leaves each with its text, replaces the files
    it rewrites, and leaves no temporary file behind; a rename that fails leaves the files that
    were there as they were and removes its temporary files."""
    from jupyter_gpupool.service.registry import store

    if syncfs != "syncfs":
        monkeypatch.setattr(store, "_syncfs", lambda: None)
    (tmp_path / "p3.yaml").write_text("old\n")
    texts = {str(tmp_path / f"p{i}.yaml"): f"kind: pool\n# {i}\n" for i in range(40)}
    store._write_all(texts)
    assert {str(p): p.read_text() for p in tmp_path.iterdir()} == texts

    real_replace = os.replace
    renamed: list[str] = []

    def failing(src, dst):
        if len(renamed) == 5:
            raise OSError(28, "No space left on device")
        renamed.append(str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(store.os, "replace", failing)
    again = {name: text + "# again\n" for name, text in texts.items()}
    with pytest.raises(OSError):
        store._write_all(again)
    on_disk = {str(p): p.read_text() for p in tmp_path.iterdir()}
    assert set(on_disk) == set(texts), "no temporary file is left"
    want = {n: (again if n in renamed else texts)[n] for n in texts}
    assert on_disk == want
