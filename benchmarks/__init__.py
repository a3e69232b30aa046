"""kira's benchmarks: run each from the repository root as a module, ``python -m benchmarks.<group>.<name>``.

The groups are packages so that one script imports another's helpers by its full name
(``from benchmarks.suites.real_photos import photos``) without touching ``sys.path``.
See benchmarks/README.md for what each script measures.
"""
