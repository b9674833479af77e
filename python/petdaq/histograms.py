"""Histogram files written by petdaqd.

The histogram file format is not specified in docs/DESIGN.md yet; once it is, this reader
follows it. Until then read_histograms() raises NotImplementedError rather than guess a
layout.
"""


def read_histograms(path):
    raise NotImplementedError(
        f"{path}: the histogram file format is not in docs/DESIGN.md yet; "
        "petdaq.read_histograms will read it once it is specified")
