"""``gpupool demo``: the simulated cluster, the gpupool service and a real JupyterHub, on 127.0.0.1."""
