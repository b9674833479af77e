"""Text reports and PNG plots of the three steps (matplotlib, no display needed)."""
import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .energy import PHOTOPEAK_KEV  # noqa: E402


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _label_edges(labels):
    edge = np.zeros(labels.shape, dtype=bool)
    edge[:, 1:] |= labels[:, 1:] != labels[:, :-1]
    edge[1:, :] |= labels[1:, :] != labels[:-1, :]
    return edge


def crystal_map_plots(path_one, path_all, scanner, lut, floods, results, du_index):
    n = scanner.position_size
    flat_lut = lut.reshape(scanner.du_count, n, n)
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.4))
    f = floods[du_index].astype(float)
    axes[0].imshow(np.sqrt(f), cmap="magma", origin="upper", interpolation="nearest")
    axes[0].set_title(f"{scanner.du_name(du_index)}: flood map (sqrt counts)")
    axes[1].imshow(np.sqrt(f), cmap="gray_r", origin="upper", interpolation="nearest")
    edge = np.ma.masked_where(~_label_edges(flat_lut[du_index]), np.ones((n, n)))
    axes[1].imshow(edge, cmap="autumn", origin="upper", interpolation="nearest", alpha=0.8)
    pk = results[du_index].peaks.reshape(-1, 2)
    axes[1].plot(pk[:, 0], pk[:, 1], "c+", ms=5)
    axes[1].set_title("crystal peaks (+) and label borders")
    for ax in axes:
        ax.set_xlabel("x (axial)")
        ax.set_ylabel("y (row 0 = last transaxial crystal)")
    _save(fig, path_one)

    cols = scanner.bdm_transaxial * scanner.du_transaxial
    rows = scanner.du_count // cols
    step = max(1, n // 64)
    tile = n // step
    mosaic = np.zeros((rows * tile, cols * tile))
    for i in range(scanner.du_count):
        r, c = divmod(i, cols)
        img = floods[i][:tile * step, :tile * step].reshape(tile, step, tile, step).sum(axis=(1, 3))
        mosaic[r * tile:(r + 1) * tile, c * tile:(c + 1) * tile] = np.sqrt(img / max(img.max(), 1))
    width = min(16.0, 1.1 * cols + 1)
    fig, ax = plt.subplots(figsize=(width, width * rows / cols + 0.6))
    ax.imshow(mosaic, cmap="magma", interpolation="nearest")
    ax.set_title("flood maps of every DU (BDM-major order, one tile per DU)")
    ax.set_xticks([])
    ax.set_yticks([])
    _save(fig, path_all)


def crystal_map_text(scanner, frame_file, results, options):
    lines = [f"petdaq-calibrate crystal-map: {frame_file.path}", f"input: {frame_file.summary()}",
             f"scanner: {scanner.du_count} DUs of {scanner.crystal_transaxial} x "
             f"{scanner.crystal_axial} crystals, flood maps {scanner.position_size}^2",
             f"flood gate: raw energy >= {options.gate_low:g} x the DU's photopeak; labels within "
             f"{options.max_radius:g} x the nearest-neighbour distance of a peak",
             "", "du        frames   gated  photopeak_adc  counts_min  counts_median  labelled  contrast"]
    for i, r in enumerate(results):
        lines.append(f"{scanner.du_name(i):9s} {r.frames:8d} {r.gated:7d} {r.photopeak_adc:14.0f} "
                     f"{int(r.peak_counts.min()):11d} {np.median(r.peak_counts):14.0f} "
                     f"{r.labelled_fraction:9.4f} {min(r.contrast, 1e6):9.1f}")
    return "\n".join(lines) + "\n"


def energy_plots(path, scanner, result, table, bins):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    u, h = result.spectrum_u
    axes[0].step(u, np.maximum(h, 0.5), where="mid", lw=0.8, label="all crystals, photopeak at 511")
    if result.fit_curve:
        axes[0].plot(result.fit_curve[0], result.fit_curve[1], "r-", lw=1.2,
                     label=f"fit: E_s = {result.saturation_keV:.0f} keV")
    axes[0].axvline(340.7, color="gray", ls=":", lw=0.8)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("u = 511 raw / photopeak")
    axes[0].set_ylabel("frames / 2 keV")
    axes[0].legend(fontsize=8)
    axes[0].set_title("summed spectrum and the non-linearity fit")

    axes[1].hist(result.peaks_adc, bins=60, color="C1")
    axes[1].set_xlabel("photopeak (ADC)")
    axes[1].set_ylabel("crystals")
    axes[1].set_title(f"gains: {np.std(result.peaks_adc) / np.mean(result.peaks_adc) * 100:.1f} % rms; "
                      f"FWHM median {np.median(result.fwhm) * 100:.1f} %")

    width = scanner.energy_bin_width
    raw = (np.arange(bins) + 0.5) * width
    kev = raw[None, :] * table.reshape(-1, bins)
    hk, edges = np.histogram(kev.ravel(), bins=np.arange(0, 900, 3.0), weights=result.spectra.ravel())
    axes[2].step(0.5 * (edges[1:] + edges[:-1]), hk, where="mid", lw=0.8)
    lo, hi = scanner.energy_window_keV
    axes[2].axvspan(lo, hi, color="C2", alpha=0.15, label=f"window {lo:g}-{hi:g} keV")
    axes[2].axvline(PHOTOPEAK_KEV, color="gray", ls=":", lw=0.8)
    axes[2].set_xlabel("corrected energy (keV)")
    axes[2].set_ylabel("frames / 3 keV")
    axes[2].legend(fontsize=8)
    axes[2].set_title("corrected spectrum, all crystals")
    _save(fig, path)


def energy_text(scanner, frame_file, result, options):
    es = result.saturation_keV
    es_text = "linear (no saturation)" if not np.isfinite(es) else (
        f"{es:.0f} keV" + (f" +- {result.saturation_sigma_keV:.0f} (fit)" if result.fit_curve else " (given)"))
    lines = [f"petdaq-calibrate energy: {frame_file.path}", f"input: {frame_file.summary()}",
             f"table: float32[{scanner.bdm_count}][{scanner.du_per_bdm}][{scanner.crystals_per_du}]"
             f"[{options.bins}], {scanner.energy_bin_width} ADC per bin",
             f"saturation E_s: {es_text}" + (f"; photopeak sigma at 511 keV: {result.sigma511_keV:.1f} keV"
                                              if result.fit_curve else ""),
             f"photopeaks: {np.nanmin(result.peaks_adc):.0f} .. {np.nanmax(result.peaks_adc):.0f} ADC, "
             f"median {np.nanmedian(result.peaks_adc):.0f}; FWHM median {np.nanmedian(result.fwhm) * 100:.2f} %; "
             f"photopeak counts min {result.photopeak_counts.min()}, median {np.median(result.photopeak_counts):.0f}",
             "", "crystal                      photopeak_adc  fwhm_percent  photopeak_counts"]
    for i in range(scanner.crystal_count):
        lines.append(f"{scanner.crystal_name(i):28s} {result.peaks_adc[i]:14.1f} {result.fwhm[i] * 100:13.2f} "
                     f"{result.photopeak_counts[i]:17d}")
    return "\n".join(lines) + "\n"


def timing_plots(path, scanner, result, table):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    tick = scanner.tick_ps
    lim = 8 * result.residual_sigma_ticks * tick
    bins = np.linspace(-lim, lim, 121)
    axes[0].hist(result.raw_dt * tick, bins=bins, histtype="step", label="before (dt - expected)")
    axes[0].hist(result.corrected_dt * tick, bins=bins, histtype="step", label="after the offsets")
    axes[0].set_xlabel("ps")
    axes[0].set_ylabel("prompts")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    axes[0].set_title(f"{result.used} prompts; residual sigma {result.residual_sigma_ticks * tick:.0f} ps")
    axes[1].hist(table * tick, bins=np.arange(table.min() - 0.5, table.max() + 1.5) * tick, color="C1")
    axes[1].set_xlabel("offset (ps)")
    axes[1].set_ylabel("crystals")
    axes[1].set_title(f"time offsets; statistical error ~{result.offset_sigma_ticks * tick:.1f} ps per crystal")
    _save(fig, path)


def timing_text(scanner, frames, plm, result, table, source):
    tick = scanner.tick_ps
    src = (f"point at {source.centre_mm} mm" if source.shape == "point" else
           f"uniform cylinder r = {source.radius_mm:g} mm, L = {source.length_mm:g} mm, centre {source.centre_mm} mm")
    lines = [f"petdaq-calibrate time-offsets: {frames}", f"coincidences: {plm}", f"source: {src}",
             f"prompts: {result.prompts} in the file, {result.used} in the final fit "
             f"(per crystal: min {result.per_crystal.min()}, median {np.median(result.per_crystal):.0f})",
             f"residual of the fit: rms {result.residual_rms_ticks:.2f} ticks "
             f"({result.residual_rms_ticks * tick:.1f} ps), robust sigma {result.residual_sigma_ticks:.2f} ticks "
             f"({result.residual_sigma_ticks * tick:.1f} ps, i.e. {result.residual_sigma_ticks * tick / np.sqrt(2) * 2.3548:.0f} ps FWHM per single)",
             f"statistical error of an offset: {result.offset_sigma_ticks:.2f} ticks (median over crystals)",
             f"offsets: {table.min()} .. {table.max()} ticks, rms {np.std(table):.2f} ticks",
             "", "crystal  offset_ticks  prompts"]
    for c in range(table.size):
        lines.append(f"{c:7d} {table[c]:13d} {result.per_crystal[c]:8d}")
    return "\n".join(lines) + "\n"


def _figures():
    """The petdaq package's figures (python/petdaq/figures.py): installed beside this package
    in share/petdaq/python, or in the source tree's python/."""
    import os
    import sys
    try:
        from petdaq import figures, histograms
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "python"))
        from petdaq import figures, histograms
    return figures, histograms


def energy_resolution_from_histograms(pdh):
    """Per-crystal photopeaks and the global energy resolution of a histogram file, and its
    crystals per ring (for the map)."""
    figures, histograms = _figures()
    h = histograms.read_histograms(pdh)
    sc = h.meta["scanner"]
    return figures.energy_resolution(h), sc["bdm_transaxial"] * sc["du_transaxial"] * sc["crystal_transaxial"]


def energy_resolution_plots(path, er, crystals_per_ring):
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.4))
    g = er.global_fit
    axes[0].step(0.5 * (er.edges[1:] + er.edges[:-1]), np.maximum(er.summed, 0.5), where="mid", lw=0.8)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("corrected energy (keV)")
    axes[0].set_ylabel("singles per bin")
    axes[0].set_title("all crystals: " + ("no photopeak fitted" if g is None else
                      f"{g.resolution_percent:.2f} % FWHM at {g.position_keV:.1f} keV"))
    ok = er.resolution_percent[er.fitted]
    axes[1].hist(ok, bins=50, color="C1")
    axes[1].set_xlabel("energy resolution (FWHM %)")
    axes[1].set_ylabel("crystals")
    axes[1].set_title(f"{ok.size} of {er.resolution_percent.size} crystals fitted" +
                      (f", median {np.median(ok):.2f} %" if ok.size else ""))
    axes[2].hist(er.position_keV[er.fitted], bins=50, color="C2")
    axes[2].axvline(PHOTOPEAK_KEV, color="gray", ls=":", lw=0.8)
    axes[2].set_xlabel("photopeak position (keV)")
    axes[2].set_ylabel("crystals")
    axes[2].set_title("photopeaks with the new energy table")
    im = axes[3].imshow(er.resolution_percent.reshape(-1, crystals_per_ring), cmap="viridis",
                        aspect="auto", interpolation="nearest", origin="lower")
    fig.colorbar(im, ax=axes[3], label="FWHM (%)")
    axes[3].set_xlabel("crystal in ring (transaxial)")
    axes[3].set_ylabel("ring (axial)")
    axes[3].set_title("per crystal; blank: too few counts")
    _save(fig, path)


def energy_resolution_text(frames, er):
    g = er.global_fit
    ok = er.resolution_percent[er.fitted]
    lines = [f"petdaq-calibrate energy resolution: {frames}, with the new crystal map and energy table",
             "definition: docs/figures.md (Gaussian + flat background on each photopeak, FWHM / position)",
             "all crystals: " + ("no photopeak fitted" if g is None else
                                 f"{g.resolution_percent:.2f} +- {g.resolution_err_percent:.2f} % FWHM, "
                                 f"photopeak {g.position_keV:.1f} keV"),
             f"per crystal: {ok.size} of {er.resolution_percent.size} fitted" +
             (f", median {np.median(ok):.2f} %, 5-95 % {np.percentile(ok, 5):.2f}-{np.percentile(ok, 95):.2f} %"
              if ok.size else ""),
             "", "crystal  photopeak_keV  fwhm_keV  fwhm_percent"]
    for c in range(er.resolution_percent.size):
        lines.append(f"{c:7d} {er.position_keV[c]:14.1f} {er.fwhm_keV[c]:9.1f} {er.resolution_percent[c]:13.2f}")
    return "\n".join(lines) + "\n"
