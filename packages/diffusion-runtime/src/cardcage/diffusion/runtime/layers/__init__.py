"""Custom ops of the diffusion runtime: ``CustomOp`` dispatch and the built-in layers.

Import-neutral: the submodules (``custom_op``, ``layernorm``, ``activation``) import torch; this
package itself imports nothing.
"""
