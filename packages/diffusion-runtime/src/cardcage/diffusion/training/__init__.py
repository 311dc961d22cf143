"""How ``cardcage/tiny-dit`` was made: drawn scenes (``scenes``) and its training (``train``).

Not part of the runtime: nothing under ``cardcage.diffusion.runtime`` imports this package, so
it adds no import to serving. Run ``python -m cardcage.diffusion.training --output DIR`` to
retrain (docs/diffusion/model.md).
"""
