"""Configuration objects users build: ``SamplingParams`` (per request), ``PipelineConfig``.

Importing this package imports nothing; the facade ``cardcage.diffusion`` loads each on first
access. These are runtime modules: a launching script imports them under
``if __name__ == "__main__":``, never at module scope (spawn re-runs that scope in every worker).
"""
