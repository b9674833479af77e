"""Scanner geometry (DESIGN section 3): global crystal id -> ring, sector, position in mm."""

import os
from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Geometry:
    """The `scanner` section of the configuration (the same defaults as config/petdaq.yaml)."""
    bdm_transaxial: int = 12
    bdm_axial: int = 2
    du_transaxial: int = 2
    du_axial: int = 2
    crystal_transaxial: int = 13
    crystal_axial: int = 13
    ring_radius_mm: float = 80.0
    crystal_pitch_transaxial_mm: float = 1.6
    crystal_pitch_axial_mm: float = 1.6
    crystal_depth_mm: float = 10.0
    du_gap_mm: float = 0.4
    bdm_gap_mm: float = 1.0

    @classmethod
    def from_config(cls, path):
        """From a petdaq YAML configuration (needs PyYAML; Debian: python3-yaml)."""
        import yaml
        with open(os.fspath(path)) as f:
            scanner = (yaml.safe_load(f) or {}).get("scanner", {}) or {}
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in scanner.items() if k in names})

    @property
    def crystals_per_ring(self):
        return self.bdm_transaxial * self.du_transaxial * self.crystal_transaxial

    @property
    def ring_count(self):
        return self.bdm_axial * self.du_axial * self.crystal_axial

    @property
    def crystal_count(self):
        return self.crystals_per_ring * self.ring_count

    def ring(self, crystal):
        """Ring index (axial position), 0 ... ring_count - 1."""
        return np.asarray(crystal) // self.crystals_per_ring

    def crystal_in_ring(self, crystal):
        return np.asarray(crystal) % self.crystals_per_ring

    def sector(self, crystal):
        """Sector = transaxial BDM index b_trans (the panel around the ring)."""
        return self.crystal_in_ring(crystal) // (self.du_transaxial * self.crystal_transaxial)

    def position_mm(self, crystal):
        """Centre of the crystal in mm, shape (..., 3): x, y across the ring, z along the axis.

        DESIGN section 3: BDM panel b_trans faces the axis at angle 2 pi b_trans /
        bdm_transaxial with its front face at ring_radius_mm; the crystal centre is half a
        crystal depth behind the face. Across the panel the DUs are crystal_transaxial
        pitches wide with du_gap_mm between them, centred on the panel; along the axis DUs
        are separated by du_gap_mm and BDMs by bdm_gap_mm, centred on z = 0.
        """
        c = np.asarray(crystal, dtype=np.int64)
        in_ring = c % self.crystals_per_ring
        ring = c // self.crystals_per_ring
        per_panel = self.du_transaxial * self.crystal_transaxial
        b_trans, in_panel = in_ring // per_panel, in_ring % per_panel
        d_trans, c_trans = in_panel // self.crystal_transaxial, in_panel % self.crystal_transaxial
        per_bdm_axial = self.du_axial * self.crystal_axial
        b_axial, in_bdm = ring // per_bdm_axial, ring % per_bdm_axial
        d_axial, c_axial = in_bdm // self.crystal_axial, in_bdm % self.crystal_axial

        pt, pa = self.crystal_pitch_transaxial_mm, self.crystal_pitch_axial_mm
        du_width_t = self.crystal_transaxial * pt
        panel_width = self.du_transaxial * du_width_t + (self.du_transaxial - 1) * self.du_gap_mm
        s = d_trans * (du_width_t + self.du_gap_mm) + (c_trans + 0.5) * pt - 0.5 * panel_width
        du_len_a = self.crystal_axial * pa
        bdm_len_a = self.du_axial * du_len_a + (self.du_axial - 1) * self.du_gap_mm
        axial_length = self.bdm_axial * bdm_len_a + (self.bdm_axial - 1) * self.bdm_gap_mm
        z = (b_axial * (bdm_len_a + self.bdm_gap_mm) + d_axial * (du_len_a + self.du_gap_mm) +
             (c_axial + 0.5) * pa - 0.5 * axial_length)
        angle = 2.0 * np.pi * b_trans / self.bdm_transaxial
        r = self.ring_radius_mm + 0.5 * self.crystal_depth_mm
        x = r * np.cos(angle) - s * np.sin(angle)
        y = r * np.sin(angle) + s * np.cos(angle)
        return np.stack([x, y, z], axis=-1)

    def outward(self, crystal):
        """Unit vector out of the ring through the crystal's panel, shape (..., 3)."""
        c = np.asarray(crystal, dtype=np.int64)
        angle = 2.0 * np.pi * self.sector(c) / self.bdm_transaxial
        return np.stack([np.cos(angle), np.sin(angle), np.zeros_like(angle)], axis=-1)

    def lut(self):
        """The CASToR look-up table of petdaq-export --format castor: per crystal id, six
        values: the centre x, y, z in mm and the unit vector out of the ring through its
        panel, shape (crystal_count, 6). The centres alone: lut()[:, :3] (= position_mm)."""
        crystals = np.arange(self.crystal_count)
        return np.concatenate([self.position_mm(crystals), self.outward(crystals)], axis=1)
