"""What the service answers over HTTP: the route table (:mod:`.routes`), who is calling
(:mod:`.auth`), the base handlers, the JSON API (:mod:`.api`) and the node table's query
(:mod:`.nodetable`); the HTML pages are in :mod:`.pages`.

Only :mod:`jupyter_gpupool.service.app`, :mod:`jupyter_gpupool.service.context` and this room
import this room (``tests/test_layers.py``)."""
