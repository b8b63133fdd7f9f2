"""Rendering results: Rich tables, JSON with units in the keys."""
