"""Tests of laplace_equivariance.marglik."""
