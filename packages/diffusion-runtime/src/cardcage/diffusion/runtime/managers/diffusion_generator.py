"""``DiffGenerator``: the offline entry point (launch workers, generate images, shut down).

Reached through the lazy ``cardcage.diffusion.DiffGenerator`` proxy, so a script can bind the
name at module scope and import this module only when ``from_pretrained()`` runs, under
``if __name__ == "__main__":``::

    from cardcage.diffusion import DiffGenerator  # a proxy: imports nothing yet

    if __name__ == "__main__":
        with DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=2) as gen:
            image = gen.generate(prompt="a yellow circle at the top at night", seed=1)
            image.save("moon.png")

``generate()`` sends the request to rank 0, which broadcasts it to the other ranks; every rank
runs the pipeline and rank 0 sends the images back. Arguments are checked here first, and what
only the model can check (a size the ranks cannot split) comes back as the same
``InvalidSamplingParamsError``; the workers keep serving after either.

A request may carry a ``request_id`` (any string): every worker logs it, and ``cancel(request_id)``
from another thread stops that request at its next denoising step on every worker (``generate``
then raises ``RequestCancelledError``; the workers stay up for the next request).

``from_pretrained()`` applies the plugin hooks in this process before it builds ``ServerArgs``
(as SGLang's launcher does), so a vendor's hook on ``ServerArgs`` or ``SamplingParams`` shapes
the arguments given here, not only the workers' copies.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, overload

from cardcage.diffusion.configs.sampling_params import MAX_IMAGES_PER_REQUEST, SamplingParams
from cardcage.diffusion.errors import (
    InvalidSamplingParamsError,
    RequestCancelledError,
    WorkerRequestError,
)
from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks
from cardcage.diffusion.runtime.server_args import ServerArgs

from .images import DiffusionImage
from .launcher import WorkerGroup, launch_workers

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DiffGenerator", "DiffusionImage"]

logger = logging.getLogger(__name__)


def _reraise_argument_error(error: WorkerRequestError) -> None:
    """Raise a worker's argument error again as the typed error it was (4xx, not 5xx)."""
    details = error.details
    if not details or details.get("category") != "invalid_sampling_params":
        return
    raise InvalidSamplingParamsError(
        str(details.get("field")),
        details.get("value"),
        str(details.get("expected")),
        message=error.error_message,
    ) from error


def _reraise_cancellation(error: WorkerRequestError, request_id: str | None) -> None:
    """Raise a worker's ``RequestCancelledError`` again as that typed error."""
    if error.error_type.rsplit(".", 1)[-1] == RequestCancelledError.__name__:
        raise RequestCancelledError(request_id) from error


class DiffGenerator:
    """A running diffusion deployment: its ``ServerArgs`` and its worker processes."""

    def __init__(self, server_args: ServerArgs, workers: WorkerGroup) -> None:
        self.server_args = server_args
        self.workers = workers

    @classmethod
    def from_pretrained(
        cls,
        model_path: str | None = None,
        *,
        server_args: ServerArgs | None = None,
        **kwargs: Any,
    ) -> DiffGenerator:
        """Launch ``num_gpus`` workers for ``model_path`` and wait until every one is ready.

        ``model_path`` is a built-in model id (``"cardcage/tiny-dit"``) or a directory saved
        with ``save_pretrained``. Pass it plus any other ``ServerArgs`` field as keywords, or a
        complete ``server_args``. Raises ``WorkerFailedError`` / ``WorkerDiedError`` naming the
        rank that failed to start (an unknown model fails every rank's initialization).
        """
        apply_plugin_hooks()  # before ServerArgs is built: its hooks must see these keywords
        if server_args is None:
            if model_path is None:
                raise TypeError("DiffGenerator.from_pretrained() needs model_path= or server_args=")
            server_args = ServerArgs(model_path=model_path, **kwargs)
        elif model_path is not None or kwargs:
            raise TypeError(
                "Pass either server_args= or model_path= with ServerArgs keywords, not both"
            )
        group = launch_workers(server_args)
        return cls(group.server_args, group)

    @overload
    def generate(
        self,
        prompt: str,
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        on_step: Callable[[int, int], None] | None = None,
        **kwargs: Any,
    ) -> DiffusionImage | list[DiffusionImage]: ...

    @overload
    def generate(
        self,
        prompt: list[str],
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        on_step: Callable[[int, int], None] | None = None,
        **kwargs: Any,
    ) -> list[DiffusionImage]: ...

    def generate(
        self,
        prompt: str | list[str],
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        on_step: Callable[[int, int], None] | None = None,
        **kwargs: Any,
    ) -> DiffusionImage | list[DiffusionImage]:
        """Generate images for ``prompt``.

        ``sampling_params`` and/or ``SamplingParams`` fields as keywords (keywords override
        the object's fields). Returns one ``DiffusionImage`` for a ``str`` prompt with
        ``num_images=1``, otherwise a list: ``num_images`` images per prompt, in prompt order,
        image ``i`` of the request seeded with ``seed + i`` (the seed defaults to
        ``ServerArgs.seed``). At most 16 images per request.

        ``on_step(step, total)`` is called in this process after each denoising step (rank 0
        reports them while it computes; 1-based ``step``), e.g. to draw a progress bar; an
        exception it raises propagates out of ``generate``.

        Raises ``InvalidSamplingParamsError`` (a ``ValueError``) for bad arguments, whether
        found here or by the pipeline; the workers keep serving. ``WorkerDiedError`` /
        ``WorkerFailedError`` when a worker died or failed meanwhile (the group is shut down),
        ``LauncherClosedError`` after ``shutdown()``, ``RequestCancelledError`` when
        ``cancel(request_id)`` stopped it.
        """
        if isinstance(prompt, str):
            prompts = [prompt]
        elif (
            isinstance(prompt, list | tuple) and prompt and all(isinstance(p, str) for p in prompt)
        ):
            prompts = list(prompt)
        else:
            raise InvalidSamplingParamsError("prompt", prompt, "a str or a non-empty list of str")
        if sampling_params is None:
            sampling_params = SamplingParams.from_dict(kwargs)  # a typo is a typed error
        elif not isinstance(sampling_params, SamplingParams):
            raise InvalidSamplingParamsError(
                "sampling_params", sampling_params, "a SamplingParams or None"
            )
        elif kwargs:
            sampling_params = SamplingParams.from_dict({**sampling_params.to_dict(), **kwargs})
        if sampling_params.seed is None:
            sampling_params = sampling_params.replace(seed=self.server_args.seed)
        total = len(prompts) * sampling_params.num_images
        if total > MAX_IMAGES_PER_REQUEST:
            raise InvalidSamplingParamsError(
                "num_images",
                sampling_params.num_images,
                f"at most {MAX_IMAGES_PER_REQUEST} images per request in all",
                message=f"{len(prompts)} prompt(s) x num_images={sampling_params.num_images} "
                f"asks for {total} images; one request makes at most {MAX_IMAGES_PER_REQUEST}. "
                "Split the request.",
            )
        answer = self.generate_raw(prompts, sampling_params, request_id=request_id, on_step=on_step)
        images = [DiffusionImage.from_wire(item) for item in answer["images"]]
        if isinstance(prompt, str) and sampling_params.num_images == 1:
            return images[0]
        return images

    def generate_raw(
        self,
        prompt: str | list[str],
        sampling_params: SamplingParams | dict[str, Any] | None,
        *,
        request_id: str | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Send one ``generate`` request to rank 0 and return its plain-data answer.

        ``{"images": [{"prompt", "seed", "width", "height", "rgb"}], "elapsed_s"}``: the form a
        server relays without building image objects. Raises like ``generate``.
        """
        params = (
            sampling_params.to_dict()
            if isinstance(sampling_params, SamplingParams)
            else sampling_params
        )
        payload: dict[str, Any] = {"prompt": prompt, "sampling_params": params}
        if request_id is not None:
            payload["request_id"] = request_id
        try:
            answer: dict[str, Any] = self.workers.submit("generate", payload, on_progress=on_step)
        except WorkerRequestError as error:
            _reraise_argument_error(error)
            _reraise_cancellation(error, request_id)
            raise
        return answer

    def cancel(self, request_id: str) -> bool:
        """Stop the running request sent with ``request_id`` at its next denoising step (any
        thread; returns at once). False when the latest request carries another id."""
        return self.workers.cancel(request_id)

    def shutdown(self) -> None:
        """Stop every worker process (idempotent)."""
        self.workers.shutdown()

    def __enter__(self) -> DiffGenerator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"<DiffGenerator model_path={self.server_args.model_path!r} {self.workers!r}>"
