"""The service's kubernetes_asyncio stays whole to its users while its model classes are loaded
only when used (:mod:`jupyter_gpupool.service.cluster.lazykube`).

Each check runs in a fresh interpreter: the import state of this one (where other tests have
imported kubernetes_asyncio as it is) says nothing. The truth is the package imported as it is,
in another fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(*parts: str) -> dict:
    """The JSON the parts' code prints last, run one after the other in a fresh interpreter."""
    code = "\n".join(textwrap.dedent(part) for part in parts)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


COUNT = """
    import json, sys
    def loaded(prefix):
        return sorted(m for m in sys.modules if m.startswith(prefix))
"""

NAMES = """
    import kubernetes_asyncio
    from kubernetes_asyncio import client
    def where(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    names = {n: where(getattr(client, n)) for n in client.__all__}
    names["models.V1PodList"] = where(getattr(client.models, "V1PodList"))
    names["config.load_kube_config"] = where(kubernetes_asyncio.config.load_kube_config)
    names["watch.Watch"] = where(kubernetes_asyncio.watch.Watch)
    names["client.rest"] = client.rest.__name__
    names["version"] = kubernetes_asyncio.__version__ + " " + client.__version__
"""


def test_the_service_loads_no_model_class_until_one_is_used():
    got = run(
        COUNT,
        """
    import jupyter_gpupool.service
    from jupyter_gpupool.service.cluster import kube, watch
    before = loaded("kubernetes_asyncio.client.models.")
    from types import SimpleNamespace
    from kubernetes_asyncio import client
    api = client.ApiClient.__new__(client.ApiClient)  # no session: only its deserializer
    # as the watch hands it an event's object
    obj = api.deserialize(SimpleNamespace(data='{"metadata": {"name": "p"}}'), "V1Pod")
    after = loaded("kubernetes_asyncio.client.models.")
    print(json.dumps({"before": before, "after": after, "name": obj.metadata.name}))
    """,
    )
    assert got["before"] == []
    # the deserializer found V1Pod (and V1ObjectMeta) by name, as the real package lets it
    assert "kubernetes_asyncio.client.models.v1_pod" in got["after"]
    assert got["name"] == "p"
    assert len(got["after"]) < 10


def test_every_name_of_the_package_is_the_same_object_as_without_it():
    plain = run("import json", NAMES, "print(json.dumps(names))")
    lazy = run("import json, jupyter_gpupool.service", NAMES, "print(json.dumps(names))")
    assert len(plain) > 700  # the API and model classes the package names
    assert lazy == plain


def test_nothing_is_changed_once_the_package_is_imported():
    got = run(
        COUNT,
        """
    import kubernetes_asyncio
    n = len(loaded("kubernetes_asyncio.client.models."))
    from jupyter_gpupool.service.cluster import lazykube
    print(json.dumps({"installed": lazykube.install(), "n": n,
                      "same": sys.modules["kubernetes_asyncio"] is kubernetes_asyncio}))
    """,
    )
    assert got["installed"] is False
    assert got["same"] is True
    assert got["n"] > 700


def test_a_module_the_package_imports_is_its_attribute_before_any_name_is_used():
    # the real __init__ leaves its modules as attributes (client.api_client), and code reads
    # them so (client.api.apps_v1_api, which the service does not use)
    got = run(
        """
    import json, sys
    from jupyter_gpupool.service.cluster import lazykube  # installs it (the service's package)
    import kubernetes_asyncio
    lazy = "kubernetes_asyncio.client.api.apps_v1_api" not in sys.modules
    cls = kubernetes_asyncio.client.api.apps_v1_api.AppsV1Api
    print(json.dumps({"lazy": lazy, "cls": cls.__qualname__}))
    """
    )
    assert got == {"lazy": True, "cls": "AppsV1Api"}
