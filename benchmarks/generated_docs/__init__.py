"""The generators of the generated docs: docs/results.md and its pages, findings.md,
learned_structure.md, data_size.md, speed.md and models.md (one module each)."""
