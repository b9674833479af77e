"""Reading petdaq-export's outputs back (docs/export.md): the CASToR list-mode pair (.cdh
header and .cdf events, with TOF and the per-event corrections) and the HDF5 file's signed
time differences, corrections and live time.

    hdr, ev = petdaq.read_castor("scan")             # scan.cdh + scan.cdf (or scan_norm)
    ev["tof_ps"], ev["id1"], ev.dtype.names           # id1 < id2; tof = t(id1) - t(id2)
    x = petdaq.read_export_hdf5("scan.h5")            # needs h5py (python3-h5py)
    x.prompts, x.prompts_signed_dt_ps, x.normalization, x.randoms_per_s, x.live_fraction
"""
from dataclasses import dataclass, field

import numpy as np


def read_castor_header(path):
    """The .cdh as a dict of its `key: value` lines (values as text)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep:
                out[key.strip()] = value.strip()
    return out


def castor_event_dtype(header):
    """The .cdf event of this header: uint32 time (ms), then in CASToR's order the optional
    float32 random rate, normalisation factor and TOF difference (ps), and the two crystals;
    in normalisation mode (the sensitivity's lines) only the factors and the crystals; in
    histogram mode the time, the factors, the counts and the crystals."""
    flag = lambda key: header.get(key, "0") == "1"  # noqa: E731
    if header.get("Data mode", "").lower().startswith("norm"):
        fields = [("attenuation", "<f4")] if flag("Attenuation correction flag") else []
        fields += [("normalization", "<f4")] if flag("Normalization correction flag") else []
        return np.dtype(fields + [("id1", "<u4"), ("id2", "<u4")])
    if header.get("Data mode", "").lower().startswith("histo"):
        # time, attenuation, randoms, normalisation, then the counts (per TOF bin), crystals.
        fields = [("time_ms", "<u4")]
        fields += [("attenuation", "<f4")] if flag("Attenuation correction flag") else []
        fields += [("randoms_per_s", "<f4")] if flag("Random correction flag") else []
        fields += [("normalization", "<f4")] if flag("Normalization correction flag") else []
        if flag("Scatter correction flag"):
            raise ValueError("histogram mode with scatter terms is not read here")
        bins = int(header.get("Histo TOF number of bins", "1")) if flag("TOF information flag") else 1
        fields += [("counts", "<f4", (bins,))] if bins > 1 else [("counts", "<f4")]
        return np.dtype(fields + [("id1", "<u4"), ("id2", "<u4")])
    fields = [("time_ms", "<u4")]
    if header.get("Attenuation correction flag", "0") == "1":
        fields.append(("attenuation", "<f4"))
    if header.get("Scatter correction flag", "0") == "1":
        fields.append(("scatter_per_s", "<f4"))
    if header.get("Random correction flag", "0") == "1":
        fields.append(("randoms_per_s", "<f4"))
    if header.get("Normalization correction flag", "0") == "1":
        fields.append(("normalization", "<f4"))
    if header.get("TOF information flag", "0") == "1":
        fields.append(("tof_ps", "<f4"))
    fields += [("id1", "<u4"), ("id2", "<u4")]
    return np.dtype(fields)


def read_castor(base):
    """The header dict and the events (a structured array) of base.cdh / base.cdf."""
    base = str(base)
    if base.endswith(".cdh"):
        base = base[:-4]
    header = read_castor_header(base + ".cdh")
    dtype = castor_event_dtype(header)
    data = np.fromfile(base + ".cdf", dtype=np.uint8)
    if data.size % dtype.itemsize:
        raise ValueError(f"{base}.cdf: {data.size} bytes, not a whole number of "
                         f"{dtype.itemsize}-byte events")
    events = data.view(dtype)
    if "Number of events" in header and int(header["Number of events"]) != events.size:
        raise ValueError(f"{base}.cdh says {header['Number of events']} events, "
                         f"{base}.cdf holds {events.size}")
    return header, events


@dataclass
class ExportedHdf5:
    prompts: np.ndarray
    delayed: np.ndarray
    prompts_signed_dt_ps: np.ndarray
    delayed_signed_dt_ps: np.ndarray
    signed_dt_convention: str
    normalization: np.ndarray = None   # per prompt: 1 / (LOR efficiency * live fraction)
    randoms_per_s: np.ndarray = None   # per prompt: randoms rate of its crystal pair
    live_fraction: float = 1.0
    acquisition_s: float = 0.0
    dead_time_s: float = 0.0
    attributes: dict = field(default_factory=dict)  # the corrections group's attributes


def read_export_hdf5(path):
    """The records, signed time differences, corrections and live time of a petdaq-export
    HDF5 file (h5py, Debian's python3-h5py)."""
    import h5py

    def text(v):
        return v.decode() if isinstance(v, bytes) else str(v)

    with h5py.File(path, "r") as f:
        corr = f["corrections"]
        attrs = {k: (text(v) if isinstance(v, (bytes, str)) else v) for k, v in corr.attrs.items()}
        return ExportedHdf5(
            prompts=f["prompts"][...], delayed=f["delayed"][...],
            prompts_signed_dt_ps=f["prompts_signed_dt_ps"][...],
            delayed_signed_dt_ps=f["delayed_signed_dt_ps"][...],
            signed_dt_convention=text(f["prompts_signed_dt_ps"].attrs["convention"]),
            normalization=corr["prompts_normalization"][...] if "prompts_normalization" in corr else None,
            randoms_per_s=corr["prompts_randoms_per_s"][...] if "prompts_randoms_per_s" in corr else None,
            live_fraction=float(attrs["live_fraction"]), acquisition_s=float(attrs["acquisition_s"]),
            dead_time_s=float(attrs["dead_time_s"]), attributes=attrs)


def signed_dt_ticks(records):
    """petdaq's signed time difference t(lower crystal id) - t(higher), in ticks (DESIGN
    section 5), of an array of records."""
    dt = records["dt"].astype(np.int64)
    return np.where(records["crystal_a"] <= records["crystal_b"], -dt, dt)
