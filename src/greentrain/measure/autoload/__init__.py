"""Directory that `greentrain track` puts first on PYTHONPATH: its sitecustomize imports greentrain.measure.auto."""
