"""The generators of docs/results.md, docs/speed.md and docs/models.md (one module each)."""
