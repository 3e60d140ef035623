"""The documentation's results pages: Jinja2 templates (``pages/templates/``) over a pandas
table of the studies' committed runs (``studies/results/``) and the speed benchmarks' reports
(``benchmarks/results/``), written to ``docs/`` by ``python -m pages.results_tables``."""
