"""What a user may choose: the service's launch options, the spawn form, and the options read
back from it and checked.

:class:`ChoosingSpawner` is the layer of :class:`~jupyter_gpupool.spawner.GPUPoolSpawner` that
answers JupyterHub's form hooks (``options_form``, ``options_from_form``,
``apply_user_options``); it reads the settings ``GPUPoolSpawner`` declares (``service_url``,
``max_pools``, ``form_template``...). The rules are pure functions in ``options`` and ``form``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from kubespawner import KubeSpawner
from traitlets import default

from ..client import GPUPoolClient
from .errors import OptionsError
from .form import form_context, render_form
from .messages import unavailable_message
from .options import (
    Catalog,
    SpawnOptions,
    default_options,
    form_to_user_options,
    is_form_field,
    parse_user_options,
)
from .service import ServiceLink, ServiceUnavailable, launch_catalog


class ChoosingSpawner(KubeSpawner):
    """KubeSpawner's form hooks answered from the pools this user may use."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # One client for the questions in flight (spawner.service): a start's launch options,
        # admissions and releases go over one kept-alive connection.
        self._service = ServiceLink(self._new_client)
        # A spawn form JupyterHub refused (a 400), to show again as it was sent.
        self._refused_choice: dict[str, Any] | None = None

    # --- the service -----------------------------------------------------------------------------

    def _new_client(self) -> GPUPoolClient:
        return GPUPoolClient(
            self.service_url,
            self.service_token,
            request_timeout=self.service_timeout,
            admission_timeout=self.service_timeout + 120,
        )

    def _groups(self) -> list[str]:
        return [g.name for g in getattr(self.user, "groups", None) or ()]

    async def _catalog(self) -> Catalog:
        """What this user may choose now; :class:`ServiceUnavailable` if the service can't say."""
        return await launch_catalog(
            self._service, self.service_token, self.user.name, self._groups()
        )

    # --- the form --------------------------------------------------------------------------------

    @default("options_form")
    def _gpupool_options_form_default(self) -> Any:
        return self._render_gpupool_form

    async def _render_gpupool_form(self, spawner: KubeSpawner) -> str:
        try:
            catalog = await self._catalog()
        except ServiceUnavailable as e:
            message = unavailable_message(str(e))
            return f'<div class="alert alert-warning">{html.escape(message)}</div>' + (
                await self._profile_form()
            )
        # A refused form comes back as it was sent; otherwise the options of the last start
        # (JupyterHub keeps them, those of a start it refused too).
        last, self._refused_choice = self._refused_choice or self.user_options, None
        chosen = default_options(
            last,
            catalog,
            max_pools=self.max_pools,
            default_gpus=self.default_gpus,
            default_queue=self.queue_by_default,
        )
        context = form_context(
            catalog,
            chosen,
            profile_form=await self._profile_form(),
            user=self.user.name,
            server=self.name or "",
        )
        return render_form(
            context, template=self.form_template, search_path=self.form_template_paths
        )

    async def _profile_form(self) -> str:
        """KubeSpawner's profile choice, when profiles are configured."""
        if not self.profile_list:
            return ""
        if callable(self.profile_list):
            return str(await self._render_options_form_dynamically(self))
        return str(self._render_options_form(self._sorted_dict_values(self.profile_list)))

    @default("options_from_form")
    def _gpupool_options_from_form_default(self) -> Any:
        return self._gpupool_options_from_form

    async def _gpupool_options_from_form(self, formdata: Mapping[str, list[str]]) -> dict[str, Any]:
        """The form's fields as checked ``user_options`` (a 400 with a message otherwise).

        JupyterHub answers a 400 with the form again, from the options of the last start: what
        was sent is remembered, so that the form comes back as the user left it."""
        ours = {k: v for k, v in formdata.items() if is_form_field(k)}
        self._refused_choice = None
        try:
            options = form_to_user_options(ours)
        except OptionsError:
            self._refused_choice = form_to_user_options(ours, strict=False)
            raise
        if self.profile_list:
            others = {k: v for k, v in formdata.items() if not is_form_field(k)}
            options = {**self._options_from_form(others), **options}
        try:
            catalog = await self._catalog()
        except ServiceUnavailable:
            return options  # start() says what to do without the service (fail_open)
        try:
            checked = self._check(options, catalog)
        except OptionsError:
            self._refused_choice = options
            raise
        return {**options, **checked.to_user_options()}

    @default("apply_user_options")
    def _apply_user_options_default(self) -> Any:
        # JupyterHub (5.3+) warns about "unhandled user_options" without a hook; they are
        # read in start(), checked against the pools the user may use at that moment.
        return _read_in_start

    def _check(self, options: Mapping[str, Any] | None, catalog: Catalog) -> SpawnOptions:
        return parse_user_options(
            options,
            catalog,
            max_pools=self.max_pools,
            default_gpus=self.default_gpus,
            default_queue=self.queue_by_default,
            extra_keys=bool(self.profile_list),
        )


def _read_in_start(spawner: ChoosingSpawner, user_options: Mapping[str, Any]) -> None:
    """``apply_user_options`` hook: nothing to do before start()."""
