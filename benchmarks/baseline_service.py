"""The gpupool service with the admission and the pool list taken out: the baseline of
``bench_service.py``.

Runs the service exactly as ``python -m jupyter_gpupool.service`` does (same arguments, same
start, same token checks, same request parsing), except that two handlers answer without doing
their work:

- ``POST api/v1/admissions`` reads and checks the request as the service does, then answers 201
  with a body of the same shape, without deciding anything or reserving GPUs;
- ``GET api/v1/pools`` answers the body it computed for its first request again, without looking
  at the cluster.

So the benchmark's ratio of the two services is the cost of admission (and of the pool list)
itself, apart from HTTP, authentication and JSON. Run by ``bench_service.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpupool.service.app import main
from jupyter_gpupool.service.web import admissionapi, api


class BaselineAdmissions(admissionapi.AdmissionsHandler):
    async def post(self) -> None:
        request, _queue = await self._request()
        self.write_json(
            {
                "id": "baseline",
                "pool": request.pools[0] if request.pools else "",
                "platform": None,
                "gpu_type": request.gpu_type,
                "node": "",
                "over_quota": False,
                "charged": f"user:{request.user}",
                "skipped": [],
                "expires_at": "",
                "user": request.user,
                "groups": list(request.groups),
                "server": request.server,
                "gpus": request.gpus,
                "nodes_fit": 0,
                "overrides": [],
                "reclaimed": [],
                "message": "baseline: nothing was decided",
            },
            status=201,
        )


class BaselinePools(api.PoolsHandler):
    answered: str | None = None

    async def get(self) -> None:
        user, groups = await self.view_of()
        if BaselinePools.answered is None:
            BaselinePools.answered = self.ctx.state.pools_json(user, groups)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(BaselinePools.answered)


admissionapi.AdmissionsHandler = BaselineAdmissions  # type: ignore[misc]
api.PoolsHandler = BaselinePools  # type: ignore[misc]

if __name__ == "__main__":
    main()
