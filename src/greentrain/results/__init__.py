"""Typed results: every JSON kind greentrain writes or reads, as one frozen view with its schema version.

A floor just above config/errors, so that every producer (estimate, measure, calibrate, experiment) and every
reader (compare, calibrate, footprint, report) builds and reads the same view. results/view.py holds the
machinery (typed fields, their checks, ``to_dict`` / ``from_dict``, ``head``, ``stamp``); the views are in
results/kinds.py (a training run: plan, search, simulate, trace, track, compare, footprint),
results/analyses.py (traffic, batch time, offload heatmap), results/experiment.py (experiment variant, plan,
manifest, report) and results/calibration.py (calibration profile, validation); results/codec.py registers
them by kind, with their schema versions and the names they were written under before, and reads any file
back as its view. Kind names are lower case with "_" between words.
"""
