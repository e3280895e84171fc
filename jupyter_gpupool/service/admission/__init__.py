"""The admission desk and the line: one lock around decide + reserve, reservations and reclaim
(:mod:`.desk`), and the requests that wait for room, admitted in a fair order (:mod:`.line`).
The decisions themselves are the core's (:mod:`jupyter_gpupool.core.admission.walk`,
:mod:`jupyter_gpupool.core.admission.queue`)."""
