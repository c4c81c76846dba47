"""Node health probes (SanityCheck): facts gathered once, each check a plain function.

See ``runner.py`` for when they run and ``probes.py`` for what each decides.
"""
