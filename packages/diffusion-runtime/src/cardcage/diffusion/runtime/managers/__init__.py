"""Worker processes of the diffusion runtime: bootstrap, launcher, worker loop and generator.

Import-neutral: this package ``__init__`` imports nothing, so naming the package never builds
runtime state (``worker_bootstrap`` relies on that in freshly spawned children).
"""
