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
    except KeyboardInterrupt:  # Ctrl-C while torch loads: a KeyboardInterrupt here is Python's "Fatal error:
        # init_import_site" with a 40-line traceback (and SystemExit too); exit as an interrupted process does
        print("greentrain.auto: interrupted (Ctrl-C) while loading, before the script started", file=sys.stderr)
        sys.stderr.flush()
        os._exit(130)
