"""Tests of laplace_equivariance.app."""
