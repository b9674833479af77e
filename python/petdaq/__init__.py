"""petdaq for analysis in Python: plain NumPy.

    import petdaq
    f = petdaq.read_plm("scan.plm")            # list-mode file (also one still being written)
    f.prompts["crystal_a"], f.delayed["dt"]    # NumPy structured arrays (RECORD)
    for batch in petdaq.subscribe("tcp://127.0.0.1:5556"):
        batch.records                           # one published batch, a structured array
    h = petdaq.read_histograms("run.pdh")      # histogram file (.pdh) of a run
    h["energy_keV"].counts, h["energy_keV"].edges, h["energy_keV"].unit, h.meta["counters"]
    g = petdaq.Geometry.from_config("petdaq.yaml")
    g.ring(crystal), g.sector(crystal), g.position_mm(crystal)

The formats are those of docs/DESIGN.md (sections 3, 5 and 7).
"""

__version__ = "0.1.0"

from .formats import (FILE_HEADER, MESSAGE_HEADER, RECORD, KIND_PROMPTS, KIND_DELAYED,  # noqa: F401
                      KIND_SINGLES, KIND_DEADTIME, DEAD_INTERVAL, FLAG_DELAYED,
                      FLAG_FROM_MULTIPLE)
from .plm import PlmFile, read_plm  # noqa: F401
from .histograms import HistogramFileError, read_histograms  # noqa: F401
from .live import Batch, subscribe  # noqa: F401
from .geometry import Geometry  # noqa: F401
