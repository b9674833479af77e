#include "tools/export/corrections.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "core/calibration.h"
#include "core/histograms.h"

namespace petdaq::exporter {

void check_crystals(const CoincRecord& r, std::uint32_t crystal_count, const MessageHeader& m,
                    std::size_t index) {
  if (r.crystal_a < crystal_count && r.crystal_b < crystal_count) return;
  const std::uint32_t bad = r.crystal_a < crystal_count ? r.crystal_b : r.crystal_a;
  throw BadRecord("message " + std::to_string(m.message_id) + " (run " +
                  std::to_string(m.run_id) + "), record " + std::to_string(index) +
                  ": crystal id " + std::to_string(bad) + " is out of range (the scanner has " +
                  std::to_string(crystal_count) + " crystals): refused, nothing written for it");
}

NormalizationTable::NormalizationTable(const std::filesystem::path& dir, const Geometry& g)
    : per_ring_(g.crystals_per_ring()),
      per_panel_(g.du_transaxial * g.crystal_transaxial),
      panels_(g.bdm_transaxial),
      rings_(g.ring_count()) {
  crystal_ = read_npy_checked<float>(dir / kCrystalFile, {g.crystal_count()});
  block_ = read_npy_checked<float>(dir / kBlockFile, {rings_, per_panel_});
  geometric_ = read_npy_checked<float>(dir / kGeometricFile, {panels_, per_panel_, per_panel_});
  axial_ = read_npy_checked<float>(dir / kAxialFile, {rings_, rings_});
  for (auto [file, values] : {std::pair{kCrystalFile, &crystal_}, std::pair{kBlockFile, &block_},
                              std::pair{kGeometricFile, &geometric_},
                              std::pair{kAxialFile, &axial_}}) {
    for (std::size_t k = 0; k < values->size(); ++k)
      if (!(std::isfinite((*values)[k]) && (*values)[k] > 0))
        throw CalibrationError((dir / file).string() + ": element " + std::to_string(k) +
                               " is " + std::to_string((*values)[k]) +
                               " (efficiencies must be finite and > 0)");
  }
}

double NormalizationTable::efficiency(std::uint32_t i, std::uint32_t j) const {
  const std::uint32_t ri = i / per_ring_, rj = j / per_ring_;
  const std::uint32_t ci = i % per_ring_, cj = j % per_ring_;
  const std::uint32_t pi = ci / per_panel_, pj = cj / per_panel_;
  const std::uint32_t ti = ci % per_panel_, tj = cj % per_panel_;
  const std::uint32_t dp = (pj + panels_ - pi) % panels_;
  return double(crystal_[i]) * crystal_[j] * block_[std::size_t{ri} * per_panel_ + ti] *
         block_[std::size_t{rj} * per_panel_ + tj] *
         geometric_[(std::size_t{dp} * per_panel_ + ti) * per_panel_ + tj] *
         axial_[std::size_t{ri} * rings_ + rj];
}

LiveTime scan_live_time(const std::filesystem::path& plm, double tick_ps) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(plm.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error(plm.string() + ": cannot open: " + std::strerror(errno));
  std::uint8_t head[kMessageHeaderBytes];
  if (std::fread(head, 1, kPlmHeaderBytes, f.get()) != kPlmHeaderBytes)
    throw std::runtime_error(plm.string() + ": shorter than the file header");
  const PlmHeader ph = decode_plm_header(head);
  std::uint64_t at = ph.header_size;
  if (std::fseek(f.get(), long(at), SEEK_SET) != 0)
    throw std::runtime_error(plm.string() + ": cannot seek");
  struct Span {
    std::uint64_t begin = ~std::uint64_t{0}, end = 0;
  };
  std::map<std::uint64_t, Span> runs;
  LiveTime live;
  double dead_ticks = 0;
  std::vector<std::uint8_t> body;
  std::error_code ec;
  const std::uint64_t file_bytes = std::filesystem::file_size(plm, ec);
  if (ec) throw std::runtime_error(plm.string() + ": " + ec.message());
  while (std::fread(head, 1, kMessageHeaderBytes, f.get()) == kMessageHeaderBytes) {
    const MessageHeader m = decode_message_header(head);
    const std::string where = plm.string() + ": message at byte " + std::to_string(at);
    if (m.magic != kMessageMagic) throw std::runtime_error(where + ": bad message magic");
    const std::uint64_t bytes = std::uint64_t{m.record_count} * m.record_size;
    if (at + kMessageHeaderBytes + bytes > file_bytes) break;  // cut short: the file's end
    const bool dead = m.kind == static_cast<std::uint16_t>(MessageKind::deadtime);
    if (dead) {
      if (m.record_size != sizeof(DeadInterval))
        throw std::runtime_error(where + ": dead-interval record size " +
                                 std::to_string(m.record_size) + ", expected " +
                                 std::to_string(sizeof(DeadInterval)));
      body.resize(bytes);
      if (std::fread(body.data(), 1, bytes, f.get()) != bytes)
        throw std::runtime_error(where + ": read failed");
      for (std::uint32_t k = 0; k < m.record_count; ++k) {
        const std::uint8_t* p = body.data() + std::size_t{k} * sizeof(DeadInterval);
        const std::uint64_t b = bytes::load_le64(p), e = bytes::load_le64(p + 8);
        if (e < b) throw std::runtime_error(where + ": dead interval ends before it begins");
        dead_ticks += double(e - b);
        ++live.dead_intervals;
      }
    } else {
      // Other kinds (prompts, delayed, and any this reader does not know) are skipped.
      if (std::fseek(f.get(), long(bytes), SEEK_CUR) != 0)
        throw std::runtime_error(where + ": cannot seek");
      if (m.kind == static_cast<std::uint16_t>(MessageKind::prompts)) live.prompts += m.record_count;
    }
    if (m.kind == static_cast<std::uint16_t>(MessageKind::prompts) ||
        m.kind == static_cast<std::uint16_t>(MessageKind::delayed) || dead) {
      Span& s = runs[m.run_id];
      s.begin = std::min(s.begin, m.t_begin);
      s.end = std::max(s.end, m.t_end);
    }
    at += kMessageHeaderBytes + bytes;
  }
  double span_ticks = 0;
  for (const auto& [run, s] : runs)
    if (s.end > s.begin) span_ticks += double(s.end - s.begin);
  live.acquisition_s = span_ticks * tick_ps * 1e-12;
  live.dead_s = std::min(dead_ticks * tick_ps * 1e-12, live.acquisition_s);
  return live;
}

PairRandoms::PairRandoms(const Settings& settings, const Geometry& geometry,
                         const std::vector<double>& crystal_singles, const LiveTime& live,
                         Model model)
    : model_(model) {
  const RandomsSettings rs = RandomsSettings::from(settings);
  const double live_s = live.live_s();
  if (!(live_s > 0)) throw std::runtime_error("randoms: the acquisition has no live time");
  singles_per_live_s_.resize(crystal_singles.size());
  for (std::size_t i = 0; i < crystal_singles.size(); ++i)
    singles_per_live_s_[i] = crystal_singles[i] / live_s;
  // 2τ Σ_{i<j good} s_i s_j, and the same per BDM for the good-pair fraction.
  std::vector<double> by_bdm(std::size_t{geometry.bdm_count()} * geometry.bdm_count());
  const double singles_rate_total =
      singles_rate_randoms_by_bdm_pair(rs, geometry, singles_per_live_s_, by_bdm);
  if (model == Model::singles_prompts) {
    if (!window_model_covers(rs))
      throw std::runtime_error(
          "randoms: the singles-prompts model does not cover this coincidence policy "
          "(docs/randoms.md); use --randoms singles-rate");
    std::vector<double> bdm(geometry.bdm_count(), 0.0);
    double singles = 0;
    for (std::uint32_t i = 0; i < geometry.crystal_count() && i < singles_per_live_s_.size(); ++i) {
      bdm[geometry.address_of(i).bdm] += singles_per_live_s_[i];
      singles += singles_per_live_s_[i];
    }
    const double g = random_pair_good_fraction(rs, bdm);
    const SinglesPromptsEstimate sp =
        singles_prompts_randoms(rs, singles, double(live.prompts) / live_s, g);
    ratio_ = singles_rate_total > 0 ? sp.randoms_per_s / singles_rate_total : 1.0;
  }
  scale_ = 2.0 * rs.window_s * ratio_ * live.live_fraction();
  total_per_s_ = singles_rate_total * ratio_ * live.live_fraction();
}

std::vector<double> crystal_singles_of(const std::vector<std::uint8_t>& bytes,
                                       std::uint32_t crystal_count) {
  const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
  const char* name = hist_name(Hist::crystal_singles);
  const HistDescriptor* d = f.find(name);
  if (!d) throw std::runtime_error(std::string("the histogram file has no `") + name + "`");
  if (d->rank != 1 || d->shape[0] != crystal_count)
    throw std::runtime_error(std::string("`") + name + "` has " + std::to_string(d->elements()) +
                             " bins, the scanner " + std::to_string(crystal_count) + " crystals");
  std::vector<double> out(crystal_count);
  for (std::uint32_t i = 0; i < crystal_count; ++i) out[i] = double(f.value(*d, i));
  return out;
}

}  // namespace petdaq::exporter
