"""An example third-party astra backend: the ``ideal`` network (see :mod:`astra_ideal.network`).

Nothing is imported here: astra loads ``astra_ideal.plugin`` on every run, and
importing a package runs its ``__init__`` first.
"""
