"""``import greentrain.auto``: turns on automatic measurement (greentrain.measure.auto, which documents it)."""
from greentrain.measure.auto import tracker as tracker  # importing it installs the hooks
