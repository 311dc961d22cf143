"""The diffusion runtime: platforms, plugins and layers. Import-neutral: imports nothing."""
