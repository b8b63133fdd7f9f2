"""Transitional: the output-file helpers moved to ``greentrain.report.files`` (issue 17).

Only experiment/ and offload/ still import this name; remove the module once they import
``greentrain.report.files`` (or their renderers live in report/).
"""

from greentrain.report.files import (
    SUFFIXES,
    check_output_path,
    check_plot_path,
    current_umask,
    pyplot,
    save_figure,
    write_atomic,
)

__all__ = ["SUFFIXES", "check_output_path", "check_plot_path", "current_umask", "pyplot", "save_figure",
           "write_atomic"]
