"""One module per ``gpupool`` verb; see :mod:`jupyter_gpupool.cli`."""
