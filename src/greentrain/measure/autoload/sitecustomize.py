"""Imported by every Python process started under `greentrain track` (this directory is on PYTHONPATH).

Turns on ``greentrain.auto`` when GREENTRAIN_AUTO=1; never lets a failure here break the tracked script.
"""

import os
import sys

if os.environ.get("GREENTRAIN_AUTO") == "1":
    try:
        import greentrain.measure.auto  # noqa: F401
    except Exception as e:  # the user's training must run even if measurement cannot
        print(f"greentrain.auto: disabled ({type(e).__name__}: {e})", file=sys.stderr)
