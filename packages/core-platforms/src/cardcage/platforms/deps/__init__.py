"""``cardcage deps``: what a plugin depends on in each host release, checked before an upgrade.

Import-safe: stdlib only, and nothing of a host is ever imported: releases are read from their
sources (an installed distribution's files or a wheel archive).
"""
