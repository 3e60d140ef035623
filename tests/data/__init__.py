"""Tests of laplace_equivariance.data."""
