"""The notebook side: what runs inside a user's server.

- ``magics/``: ``%gpupool`` (``%load_ext jupyter_gpupool``);
- ``widgets/``: :class:`~jupyter_gpupool.notebook.widgets.LaunchPanel` (public path
  ``jupyter_gpupool.notebook.widgets``);
- ``serverext/``: the jupyter-server extension behind the JupyterLab status item and panel;
- ``session.py``: what a user can do from a notebook (pools, launch, release), shared by them.

It talks to the gpupool service and the hub through the shared clients only.
"""
