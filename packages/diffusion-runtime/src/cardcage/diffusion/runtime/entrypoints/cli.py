"""``cardcage-diffusion``: generate images from the command line, or serve the images API.

::

    cardcage-diffusion generate --model-path cardcage/tiny-dit --num-gpus 2 \\
        --prompt "a yellow circle at the top at night" --output moon.png
    cardcage-diffusion serve --model-path cardcage/tiny-dit --num-gpus 2 --port 30000
    cardcage-diffusion --version

An offline script in the seed's sense: spawn re-imports this module (through the console-script
wrapper) in every worker and in the HTTP child before they initialize their platform, so its
module scope imports the stdlib only; the runtime is imported inside the command functions.

After parsing, ``main()`` registers and applies the diffusion plugins' hooks in this process
before it builds ``ServerArgs`` or ``SamplingParams`` (SGLang's CLI applies them first too), so a
vendor's hook on either class shapes the command line's arguments, not only the workers' copies.
``--help``, ``--version`` and argparse's own errors load no plugin.

Before any worker is spawned, ``--model-path`` is resolved in this process
(``models.resolve.resolve_model``: stdlib only, milliseconds): a path that names no model, or a
directory whose ``config.json`` is unusable, is a bad argument, and ``generate`` warns when the
size asked for is not the one the model's ``config.json`` says it was trained at.

Exit status: 0 on success (and after SIGTERM/SIGINT stopped ``serve``), 1 for a runtime error
(the message names what failed and, for a worker that crashed, shows the worker's traceback;
``--log-level debug`` adds this process's traceback, and the worker's for a worker error that
is the user's mistake, such as weights that do not match their ``config.json``), 2 for a bad
argument, 128 + the signal number when a signal interrupts ``generate``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import signal
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)

PROG = "cardcage-diffusion"
DISTRIBUTION = "cardcage-diffusion-runtime"
# Reported by --version next to the runtime: what a vendor's bug report needs to reproduce.
_RELATED_DISTRIBUTIONS = (
    "cardcage-core-hooks",
    "cardcage-core-platforms",
    "cardcage-shm-broadcast",
    "torch",
)
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_INTERRUPT_GRACE = 1.0  # seconds a worker gets to exit on its own after an interruption
# ServerArgs / SamplingParams field -> the option that sets it.
_OPTION_OF_FIELD = {
    "num_inference_steps": "--steps",
    "num_images": "--num-images",
}


class _ArgumentError(Exception):
    """A value argparse accepted but the runtime rejects: exit 2 with the option named."""


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def version_text() -> str:
    """What ``--version`` prints: this distribution's version, then Python's and the versions
    of the distributions it runs on, as installed (read from their metadata: nothing imported).
    """
    from cardcage.diffusion import __version__

    own = _installed_version(DISTRIBUTION)
    first = (
        f"{PROG} {own}"
        if own
        else f"{PROG} {__version__} (source tree; {DISTRIBUTION} is not installed)"
    )
    others = [f"Python {platform.python_version()}"]
    for name in _RELATED_DISTRIBUTIONS:
        others.append(f"{name} {_installed_version(name) or 'not installed'}")
    return f"{first}\n{', '.join(others)}\n"


class _VersionAction(argparse.Action):
    """``--version``: print ``version_text()`` on stdout and exit 0 (computed only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(version_text())
        sys.stdout.flush()
        parser.exit()


class _Interrupted(BaseException):
    """SIGINT or SIGTERM during ``generate``: unwind so the workers are shut down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def build_parser() -> argparse.ArgumentParser:
    # Import-safe (stdlib and the errors module): the range --seed shares with every request.
    from cardcage.diffusion.configs.sampling_params import MAX_SEED

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Generate images with the cardcage diffusion runtime, or serve an "
        "OpenAI-style images API.",
    )
    parser.add_argument(
        "--version", action=_VersionAction,
        help="print the version (with Python's, torch's and the cardcage packages') and exit",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--model-path", required=True,
            help="a built-in model id (cardcage/tiny-dit) or a directory holding config.json "
            "and model.safetensors",
        )  # fmt: skip
        sub.add_argument(
            "--num-gpus", type=int, default=1,
            help="worker processes, one per device (CPU workers on the CPU platform); default 1",
        )  # fmt: skip
        sub.add_argument(
            "--log-level", choices=LOG_LEVELS, default="info",
            help="log level of this process and the workers; 'debug' also prints tracebacks "
            "(a worker that crashes shows its own at every level)",
        )  # fmt: skip

    generate = commands.add_parser(
        "generate", help="generate image(s) and write PNG files",
        description="Launch the workers, generate the image(s), write PNG files, stop.",
    )  # fmt: skip
    common(generate)
    generate.set_defaults(subparser=generate)
    generate.add_argument("--prompt", required=True, help="the text to draw")
    generate.add_argument(
        "--output", default="output.png",
        help="PNG path (default output.png); with --num-images N > 1, files are named "
        "STEM-0.png ... STEM-(N-1).png",
    )  # fmt: skip
    generate.add_argument("--negative-prompt", help="text to steer away from")
    generate.add_argument("--height", type=int, help="image height in pixels (multiple of 8)")
    generate.add_argument("--width", type=int, help="image width in pixels (multiple of 8)")
    generate.add_argument("--steps", type=int, help="denoising steps (default: the model's)")
    generate.add_argument(
        "--guidance-scale", type=float, help="classifier-free guidance (>= 1; default: model's)"
    )
    generate.add_argument(
        "--seed", type=int, help=f"seed of image 0, 0 to {MAX_SEED} (image i uses seed + i)"
    )
    generate.add_argument("--num-images", type=int, default=1, help="images to generate")

    serve = commands.add_parser(
        "serve", help="serve POST /v1/images/generations over HTTP",
        description="Launch the workers and an HTTP server process; stop on SIGINT/SIGTERM.",
    )  # fmt: skip
    common(serve)
    serve.set_defaults(subparser=serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=30000,
        help="port to bind (default 30000; 0 picks a free port, printed in the 'Serving' line)",
    )  # fmt: skip
    serve.add_argument(
        "--seed", type=int,
        help=f"default seed of requests that do not pass one, 0 to {MAX_SEED} (the range "
        "requests accept; default 42)",
    )  # fmt: skip
    serve.add_argument(
        "--max-queue", type=int, default=8,
        help="image requests that may wait behind the running one; more get 503 (default 8)",
    )  # fmt: skip
    _add_limit_options(serve)
    return parser


def _add_limit_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s per-request limits (``entrypoints.limits.ServeLimits``; stdlib only here)."""
    serve.add_argument(
        "--max-pixels", type=int, default=1024 * 1024,
        help="largest image, width x height pixels; larger sizes get 400 (default 1048576)",
    )  # fmt: skip
    serve.add_argument(
        "--max-steps", type=int, default=100,
        help="most denoising steps per request; more get 400 (default 100)",
    )  # fmt: skip
    serve.add_argument(
        "--max-pixel-steps", type=int, default=512 * 512 * 50,
        help="most work per request, width x height x steps x n; more get 413 "
        "(default 13107200: one 512x512 image at 50 steps)",
    )  # fmt: skip
    serve.add_argument(
        "--request-timeout", type=float, default=300.0,
        help="seconds a request may take, queue wait included; past it the workers stop it at "
        "the next denoising step and it gets 504 (default 300)",
    )  # fmt: skip


def _option(field: str) -> str:
    return _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))


def _argument_error(exc: Any) -> _ArgumentError:
    """``InvalidArgumentError`` in the command line's words (the option, not the field)."""
    return _ArgumentError(
        f"argument {_option(exc.field)}: {exc.value!r} is not valid: expected {exc.expected}"
    )


def _server_args(args: argparse.Namespace, **extra: Any) -> Any:
    from cardcage.diffusion.errors import InvalidArgumentError
    from cardcage.diffusion.runtime.server_args import ServerArgs

    fields = {"model_path": args.model_path, "num_gpus": args.num_gpus, "log_level": args.log_level}
    fields.update({key: value for key, value in extra.items() if value is not None})
    try:
        return ServerArgs(**fields)
    except InvalidArgumentError as exc:
        raise _argument_error(exc) from None


def _sampling_params(args: argparse.Namespace) -> Any:
    from cardcage.diffusion.configs.sampling_params import SamplingParams
    from cardcage.diffusion.errors import InvalidArgumentError

    given = {
        "height": args.height,
        "width": args.width,
        "num_inference_steps": args.steps,
        "guidance_scale": args.guidance_scale,
        "seed": args.seed,
        "num_images": args.num_images,
        "negative_prompt": args.negative_prompt,
    }
    try:
        return SamplingParams(**{key: value for key, value in given.items() if value is not None})
    except InvalidArgumentError as exc:
        raise _argument_error(exc) from None


def _output_paths(output: str, count: int) -> list[Path]:
    path = Path(output)
    if count == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{index}{path.suffix or '.png'}") for index in range(count)]


def _check_writable(paths: list[Path]) -> None:
    """Refuse an output that cannot be written before any worker starts (exit 2)."""
    for path in paths:
        if path.is_dir():
            raise _ArgumentError(f"argument --output: {path} is a directory; name a .png file")
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent  # the folders in between are created on write
        if not parent.is_dir():
            raise _ArgumentError(
                f"argument --output: {path} cannot be created: {parent} is not a directory"
            )
        if not os.access(parent, os.W_OK | os.X_OK):
            raise _ArgumentError(
                f"argument --output: {path} cannot be created: {parent} is not writable"
            )


def _resolve_model(model_path: str) -> Any:
    """The model ``--model-path`` names (``models.resolve.ResolvedModel``), checked here.

    Workers would find the same mistake only after seconds of start-up, and report it with a
    traceback of the runtime's frames; here it is a bad argument before anything is spawned.
    Import-safe: the resolver reads ``config.json`` with the stdlib, not torch.
    """
    from cardcage.diffusion.runtime.models.errors import ModelError
    from cardcage.diffusion.runtime.models.resolve import resolve_model

    try:
        return resolve_model(model_path)
    except ModelError as exc:
        raise _ArgumentError(f"argument --model-path: {exc}") from None


def _warn_off_trained_size(model: Any, params: Any) -> None:
    """One WARNING line when the size asked for is not the one the model was trained at.

    The picture is still made (the size is valid), but it is noise rather than the scene: a
    user who asked for 256x256 should know that before wondering what went wrong. The trained
    size comes from the model's ``config.json`` (``trained_size``); none there, no warning.
    """
    warning = model.config.size_warning(params.width, params.height)
    if warning is not None:
        logger.warning("%s: %s", model.model_path, warning)


def _install_interrupts() -> dict[int, Any]:
    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one interruption is enough: clean up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise _Interrupted(signum)

    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def _step_bar() -> tuple[Any, Callable[[int, int], None]]:
    """A tqdm bar over the denoising steps, and the ``on_step`` callback that advances it.

    ``disable=None``: tqdm draws only when stderr is a terminal, so a piped or captured run
    (CI, a script reading our output) gets no control characters. Rank 0 reports each step to
    this process (``DiffGenerator.generate(on_step=...)``); the library itself never draws.
    """
    from tqdm import tqdm

    bar = tqdm(desc="denoising", unit="step", disable=None, file=sys.stderr, dynamic_ncols=True)

    def on_step(step: int, total: int) -> None:
        if bar.total != total:
            bar.reset(total=total)
        bar.update(step - bar.n)

    return bar, on_step


def _generate(args: argparse.Namespace) -> int:
    if not args.prompt.strip():
        raise _ArgumentError("argument --prompt: must not be empty")
    params = _sampling_params(args)
    server_args = _server_args(args)
    paths = _output_paths(args.output, params.num_images)
    _check_writable(paths)
    _warn_off_trained_size(_resolve_model(server_args.model_path), params)
    from cardcage.diffusion.errors import InvalidArgumentError
    from cardcage.diffusion.runtime.managers.diffusion_generator import DiffGenerator

    previous = _install_interrupts()
    try:
        started = time.perf_counter()
        generator = DiffGenerator.from_pretrained(server_args=server_args)
        ready = time.perf_counter()
        bar, on_step = _step_bar()
        try:
            result = generator.generate(prompt=args.prompt, sampling_params=params, on_step=on_step)
        except InvalidArgumentError as exc:  # a limit of this model (its largest side)
            generator.shutdown()
            raise _argument_error(exc) from None
        except BaseException:
            # Interrupted mid-image: a busy worker would read the shutdown request only once
            # done, so do not wait the launcher's full grace period before terminating it.
            generator.workers.shutdown(graceful_timeout=_INTERRUPT_GRACE)
            raise
        finally:
            bar.close()
        generator.shutdown()
        images = list(result) if isinstance(result, list | tuple) else [result]
        done = time.perf_counter()
        logger.info(
            "%d worker(s) ready in %.2f s; %d image(s) generated in %.2f s",
            server_args.num_gpus, ready - started, len(images), done - ready,
        )  # fmt: skip
    except _Interrupted as stop:
        print(f"{PROG} generate: interrupted by {stop}; workers stopped.", file=sys.stderr)
        return 128 + stop.signum
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    for image, path in zip(images, paths, strict=False):
        try:
            image.save_png(path)
        except OSError as exc:
            raise _OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        seed = getattr(image, "seed", None)
        height, width = (
            getattr(image, "height", params.height),
            getattr(image, "width", params.width),
        )
        detail = f"{width}x{height}" + (f", seed {seed}" if seed is not None else "")
        print(f"Wrote {path} ({detail})", flush=True)
    return 0


class _OutputError(Exception):
    """A failure outside the runtime's own errors (writing the output): exit 1."""


def _serve(args: argparse.Namespace) -> int:
    if args.max_queue < 0:
        raise _ArgumentError(
            f"argument --max-queue: {args.max_queue!r} is not valid: expected >= 0"
        )
    limits = _serve_limits(args)
    server_args = _server_args(args, host=args.host, port=args.port, seed=args.seed)
    _resolve_model(server_args.model_path)  # the server warns about each request's size
    from .serve import serve

    count = server_args.num_gpus

    def ready(url: str) -> None:
        print(
            f"Serving {server_args.model_path} at {url} with {count} worker"
            f"{'s' if count != 1 else ''}: POST {url}/v1/images/generations, GET {url}/health. "
            "Press Ctrl-C to stop.",
            flush=True,
        )

    return serve(server_args, limits=limits, on_ready=ready)


def _serve_limits(args: argparse.Namespace) -> Any:
    for option, value in (
        ("--max-pixels", args.max_pixels),
        ("--max-steps", args.max_steps),
        ("--max-pixel-steps", args.max_pixel_steps),
    ):
        if value < 1:
            raise _ArgumentError(f"argument {option}: {value!r} is not valid: expected >= 1")
    if not args.request_timeout > 0:
        raise _ArgumentError(
            f"argument --request-timeout: {args.request_timeout!r} is not valid: expected > 0"
        )
    from .limits import ServeLimits

    return ServeLimits(
        max_pixels=args.max_pixels,
        max_steps=args.max_steps,
        max_pixel_steps=args.max_pixel_steps,
        request_timeout=args.request_timeout,
        max_queue=args.max_queue,
    )


def _print_left_out_worker_traceback(exc: BaseException) -> None:
    """The worker traceback a user's mistake left out of its message (``--log-level debug``)."""
    from cardcage.diffusion.errors import (
        WORKER_TRACEBACK_HEADER,
        WorkerFailedError,
        WorkerRequestError,
    )

    if isinstance(exc, WorkerFailedError | WorkerRequestError) and exc.user_mistake:
        print(f"{WORKER_TRACEBACK_HEADER}\n{exc.traceback.rstrip()}", file=sys.stderr)


def _configure_logging(level: str) -> None:
    """Log to stderr at ``level``, unless an embedding application configured logging."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=level.upper(),
            format="[%(asctime)s launcher] %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )


def _apply_plugin_hooks() -> None:
    """Register and apply the diffusion plugins' hooks here, before any argument object exists.

    SGLang's CLI does the same first. ``ServerArgs`` and ``SamplingParams`` are built in this
    process from the options, so a hook on either (a vendor's defaults or limits) must be in
    place now: applied later, by the launcher, it would shape only the workers' copies, and a
    value it refuses would fail a worker instead of being a clean argument error here.
    """
    from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks

    apply_plugin_hooks()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (see the module docstring)."""
    from cardcage.diffusion.runtime.managers.worker_bootstrap import quiet_torch_numpy_warning

    quiet_torch_numpy_warning()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for a bad argument, 0 for --help
        return exc.code if isinstance(exc.code, int) else 2
    debug = args.log_level == "debug"
    _configure_logging(args.log_level)
    sub: argparse.ArgumentParser = args.subparser
    from cardcage.hooks.errors import CardcageError

    try:
        _apply_plugin_hooks()
        if args.command == "generate":
            return _generate(args)
        return _serve(args)
    except _ArgumentError as exc:
        sub.print_usage(sys.stderr)
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (CardcageError, _OutputError) as exc:
        if debug:
            logger.exception("%s %s failed", PROG, args.command)
        # A worker that crashed carries the worker's traceback (str(exc) ends with it): always
        # shown, since the message points the reader to it and nothing else prints it. A worker
        # error that is the user's mistake leaves it out (its text names the fix): debug only.
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        if debug:
            _print_left_out_worker_traceback(exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
