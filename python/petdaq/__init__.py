"""petdaq for analysis in Python: plain NumPy.

    import petdaq
    f = petdaq.read_plm("scan.plm")            # list-mode file (also one still being written)
    f.prompts["crystal_a"], f.delayed["dt"]    # NumPy structured arrays (RECORD)
    f.singles["energy"]                         # SINGLE, where the file records singles
    for batch in petdaq.subscribe("tcp://127.0.0.1:5556"):
        batch.records                           # one published batch, a structured array
    for batch in petdaq.subscribe(topics=("singles",)):   # output.singles.enabled
        batch.records["crystal"]                # SINGLE: time, crystal, energy
    h = petdaq.read_histograms("run.pdh")      # histogram file (.pdh) of a run
    h["energy_keV"].counts, h["energy_keV"].edges, h["energy_keV"].unit, h.meta["counters"]
    from petdaq import figures                  # CTR and energy resolution (SciPy; docs/figures.md)
    figures.ctr(h).fwhm_ps, figures.energy_resolution(h).global_fit.resolution_percent
    im = petdaq.read_image("run.pdim")         # live TOF back-positioned image and centroid trace
    im.run, im.window, im.trace["z_mm"], im.axial_run
    g = petdaq.Geometry.from_config("petdaq.yaml")
    g.ring(crystal), g.sector(crystal), g.position_mm(crystal)
    hdr, ev = petdaq.read_castor("scan")       # petdaq-export's CASToR files, TOF, corrections
    x = petdaq.read_export_hdf5("scan.h5")     # its HDF5: signed Δt, corrections, live time

The formats are those of docs/DESIGN.md (sections 3, 4, 5 and 7).
"""

__version__ = "0.1.0"

from .formats import (FILE_HEADER, MESSAGE_HEADER, RECORD, SINGLE, KIND_PROMPTS, KIND_DELAYED,  # noqa: F401
                      KIND_SINGLES, KIND_DEADTIME, DEAD_INTERVAL, FLAG_DELAYED,
                      FLAG_FROM_MULTIPLE)
from .plm import PlmFile, read_plm  # noqa: F401
from .histograms import HistogramFileError, read_histograms  # noqa: F401
from .image import Image, ImageFileError, read_image  # noqa: F401
from .live import Batch, subscribe  # noqa: F401
from .geometry import Geometry  # noqa: F401
from .exports import ExportedHdf5, read_castor, read_export_hdf5, signed_dt_ticks  # noqa: F401
