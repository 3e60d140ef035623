"""The application around the library, which the library never imports.

The command line (``cli``), run settings (``config``, ``run_config``), run folders and their
records (``runs``, ``run_lock``, ``parsed_json``), a run (``experiment``, ``evaluation``,
``device_speed``), tables of runs (``summary``) and their plots (``run_plots``). This package
imports nothing at import, so that ``laplace-equivariance --help`` answers without torch.
"""
