pytest_plugins = ["jupyter_gpupool.sim.pytest_plugin"]
