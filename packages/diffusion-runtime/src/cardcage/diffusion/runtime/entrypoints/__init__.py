"""Entry points of the diffusion runtime: the ``cardcage-diffusion`` command and its HTTP server.

Import-neutral: this package ``__init__`` imports nothing. ``cli`` is the console script's
module, so spawn re-imports it (through the console-script wrapper) in every worker and in the
HTTP child before they initialize anything; it keeps its module scope to the stdlib for that
reason. ``http_server`` runs only in the HTTP child, imported after plugin hooks are applied.
"""
