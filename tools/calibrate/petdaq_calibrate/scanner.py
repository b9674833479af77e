"""The scanner of a petdaq configuration: addressing (DESIGN section 3) and crystal positions."""
import math
from dataclasses import dataclass

import numpy as np
import yaml

from . import CalibrationError

# Defaults of config/petdaq.yaml for the keys this tool reads.
_SCANNER_DEFAULTS = {
    "bdm_transaxial": 12, "bdm_axial": 2, "du_transaxial": 2, "du_axial": 2,
    "crystal_transaxial": 13, "crystal_axial": 13, "position_size": 256, "tick_ps": 15.625,
    "ring_radius_mm": 80.0, "crystal_pitch_transaxial_mm": 1.6, "crystal_pitch_axial_mm": 1.6,
    "crystal_depth_mm": 10.0, "du_gap_mm": 0.4, "bdm_gap_mm": 1.0,
}
LIGHT_MM_PER_PS = 0.299792458


def load_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except OSError as e:
        raise CalibrationError(f"{path}: cannot read the configuration: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise CalibrationError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise CalibrationError(f"{path}: the configuration is not a mapping")
    return doc


@dataclass(frozen=True)
class Scanner:
    bdm_transaxial: int
    bdm_axial: int
    du_transaxial: int
    du_axial: int
    crystal_transaxial: int
    crystal_axial: int
    position_size: int
    tick_ps: float
    ring_radius_mm: float
    crystal_pitch_transaxial_mm: float
    crystal_pitch_axial_mm: float
    crystal_depth_mm: float
    du_gap_mm: float
    bdm_gap_mm: float
    energy_bin_width: int
    energy_window_keV: tuple
    head_marker: int
    tail_marker: int
    check_markers: bool

    @staticmethod
    def from_config(doc, path="configuration"):
        sc = dict(_SCANNER_DEFAULTS)
        sc.update(doc.get("scanner") or {})
        cal = doc.get("calibration") or {}
        win = doc.get("energy_window") or {}
        fr = doc.get("frame") or {}
        try:
            s = Scanner(
                **{k: type(_SCANNER_DEFAULTS[k])(sc[k]) for k in _SCANNER_DEFAULTS},
                energy_bin_width=int(cal.get("energy_bin_width", 10)),
                energy_window_keV=(float(win.get("low_keV", 350.0)), float(win.get("high_keV", 650.0))),
                head_marker=int(fr.get("head_marker", 0xA)),
                tail_marker=int(fr.get("tail_marker", 0x5)),
                check_markers=bool(fr.get("check_markers", True)))
        except (TypeError, ValueError) as e:
            raise CalibrationError(f"{path}: scanner section: {e}") from e
        for k in ("bdm_transaxial", "bdm_axial", "du_transaxial", "du_axial", "crystal_transaxial",
                  "crystal_axial", "position_size", "energy_bin_width"):
            if getattr(s, k) <= 0:
                raise CalibrationError(f"{path}: {k} must be > 0, got {getattr(s, k)}")
        if s.crystals_per_du > 255 or s.position_size > 256 or s.du_per_bdm > 16:
            raise CalibrationError(f"{path}: scanner does not fit the frame's addressing")
        return s

    @property
    def bdm_count(self):
        return self.bdm_transaxial * self.bdm_axial

    @property
    def du_per_bdm(self):
        return self.du_transaxial * self.du_axial

    @property
    def du_count(self):
        return self.bdm_count * self.du_per_bdm

    @property
    def crystals_per_du(self):
        return self.crystal_transaxial * self.crystal_axial

    @property
    def crystals_per_ring(self):
        return self.bdm_transaxial * self.du_transaxial * self.crystal_transaxial

    @property
    def crystal_count(self):
        return self.du_count * self.crystals_per_du

    def du_name(self, du_index):
        b, d = divmod(int(du_index), self.du_per_bdm)
        return f"BDM {b} DU {d}"

    def crystal_name(self, table_index):
        """Name of an index into the [bdm][du][crystal] order of energy_correction.npy."""
        du_index, c = divmod(int(table_index), self.crystals_per_du)
        return f"{self.du_name(du_index)} crystal {c}"

    def label_to_local(self, label):
        """Flood-map label (row * crystal_axial + col, row 0 at the top) to the local crystal."""
        row, col = np.divmod(label, self.crystal_axial)
        return (self.crystal_transaxial - 1 - row) * self.crystal_axial + col

    def global_crystal(self, bdm, du, local):
        """Global crystal id of DESIGN section 3 (vectorised)."""
        b_axial, b_trans = np.divmod(bdm, self.bdm_transaxial)
        d_trans, d_axial = np.divmod(du, self.du_axial)
        c_trans, c_axial = np.divmod(local, self.crystal_axial)
        in_ring = (b_trans * (self.du_transaxial * self.crystal_transaxial)
                   + d_trans * self.crystal_transaxial + c_trans)
        ring = (b_axial * (self.du_axial * self.crystal_axial) + d_axial * self.crystal_axial + c_axial)
        return ring * self.crystals_per_ring + in_ring

    def table_to_global(self):
        """Global crystal id of every [bdm][du][crystal] table index."""
        idx = np.arange(self.crystal_count)
        du_index, local = np.divmod(idx, self.crystals_per_du)
        bdm, du = np.divmod(du_index, self.du_per_bdm)
        return self.global_crystal(bdm, du, local)

    def crystal_positions_mm(self):
        """Centre of each crystal's front face, by global id, (x, y, z) in mm.

        The BDMs are flat panels whose faces touch a circle of ring_radius_mm; timing is
        referred to the face (the mean depth of interaction is alike on both sides of a pair).
        """
        pos = np.zeros((self.crystal_count, 3))
        idx = np.arange(self.crystal_count)
        du_index, local = np.divmod(idx, self.crystals_per_du)
        bdm, du = np.divmod(du_index, self.du_per_bdm)
        b_axial, b_trans = np.divmod(bdm, self.bdm_transaxial)
        d_trans, d_axial = np.divmod(du, self.du_axial)
        c_trans, c_axial = np.divmod(local, self.crystal_axial)
        pt, pa = self.crystal_pitch_transaxial_mm, self.crystal_pitch_axial_mm
        du_w = self.crystal_transaxial * pt
        total_t = self.du_transaxial * du_w + (self.du_transaxial - 1) * self.du_gap_mm
        du_l = self.crystal_axial * pa
        bdm_l = self.du_axial * du_l + (self.du_axial - 1) * self.du_gap_mm
        total_a = self.bdm_axial * bdm_l + (self.bdm_axial - 1) * self.bdm_gap_mm
        s = d_trans * (du_w + self.du_gap_mm) + (c_trans + 0.5) * pt - 0.5 * total_t
        z = (b_axial * (bdm_l + self.bdm_gap_mm) + d_axial * (du_l + self.du_gap_mm)
             + (c_axial + 0.5) * pa - 0.5 * total_a)
        angle = 2 * math.pi * b_trans / self.bdm_transaxial
        c, sn = np.cos(angle), np.sin(angle)
        gid = self.global_crystal(bdm, du, local)
        pos[gid, 0] = self.ring_radius_mm * c - s * sn
        pos[gid, 1] = self.ring_radius_mm * sn + s * c
        pos[gid, 2] = z
        return pos
