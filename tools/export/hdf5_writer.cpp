#include "tools/export/hdf5_writer.h"

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <utility>
#include <set>
#include <stdexcept>

#include "core/geometry.h"
#include "core/histograms.h"
#include "proto/signed_tof.h"
#include "tools/export/crystal_position.h"

namespace petdaq::exporter {

namespace {

constexpr hsize_t kChunkRecords = 1 << 16;  // 2 MiB chunks

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error("HDF5: " + what + " failed");
  return id;
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5: " + what + " failed");
}

H5Handle record_type(bool file) {
  H5Handle t(H5Tcreate(H5T_COMPOUND, file ? 32 : sizeof(CoincRecord)), H5Tclose, "record type");
  auto member = [&](const char* name, std::size_t offset, hid_t native, hid_t le) {
    check_status(H5Tinsert(t.get(), name, offset, file ? le : native), name);
  };
  member("time_a", offsetof(CoincRecord, time_a), H5T_NATIVE_UINT64, H5T_STD_U64LE);
  member("dt", offsetof(CoincRecord, dt), H5T_NATIVE_INT32, H5T_STD_I32LE);
  member("crystal_a", offsetof(CoincRecord, crystal_a), H5T_NATIVE_UINT32, H5T_STD_U32LE);
  member("crystal_b", offsetof(CoincRecord, crystal_b), H5T_NATIVE_UINT32, H5T_STD_U32LE);
  member("energy_a", offsetof(CoincRecord, energy_a), H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
  member("energy_b", offsetof(CoincRecord, energy_b), H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
  member("flags", offsetof(CoincRecord, flags), H5T_NATIVE_UINT32, H5T_STD_U32LE);
  return t;
}

H5Handle single_type(bool file) {
  H5Handle t(H5Tcreate(H5T_COMPOUND, file ? 16 : sizeof(Single)), H5Tclose, "single type");
  auto member = [&](const char* name, std::size_t offset, hid_t native, hid_t le) {
    check_status(H5Tinsert(t.get(), name, offset, file ? le : native), name);
  };
  member("time", offsetof(Single, time), H5T_NATIVE_UINT64, H5T_STD_U64LE);
  member("crystal", offsetof(Single, crystal), H5T_NATIVE_UINT32, H5T_STD_U32LE);
  member("energy", offsetof(Single, energy), H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
  return t;
}

void attr(hid_t on, const char* name, hid_t mem_type, hid_t file_type, const void* value) {
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose, "scalar space");
  H5Handle a(H5Acreate2(on, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
             name);
  check_status(H5Awrite(a.get(), mem_type, value), name);
}
void attr(hid_t on, const char* name, std::uint64_t v) {
  attr(on, name, H5T_NATIVE_UINT64, H5T_STD_U64LE, &v);
}
void attr(hid_t on, const char* name, double v) {
  attr(on, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, &v);
}
void attr(hid_t on, const char* name, const std::string& v) {
  H5Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check_status(H5Tset_size(t.get(), std::max<std::size_t>(1, v.size())), name);
  check_status(H5Tset_cset(t.get(), H5T_CSET_UTF8), name);
  attr(on, name, t.get(), t.get(), v.empty() ? "" : v.data());
}

void attr(hid_t on, const char* name, const std::vector<double>& v) {
  const hsize_t n = v.size();
  H5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, name);
  H5Handle a(H5Acreate2(on, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
             name);
  check_status(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, v.data()), name);
}

template <typename T>
void dataset(hid_t on, const char* name, hid_t mem_type, hid_t file_type,
             const std::vector<T>& values, std::vector<hsize_t> dims) {
  H5Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose, name);
  H5Handle d(H5Dcreate2(on, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose, name);
  check_status(H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), name);
}

// One histogram file (DESIGN section 7) as a group: a dataset per histogram, of its shape and
// unsigned element type, with `unit`, `lo`, `width` and `bin_edges` (of the last axis) as
// attributes; the file header and its JSON document as the group's attributes.
void write_histograms(hid_t on, const std::string& group_name, const std::vector<std::uint8_t>& bytes,
                      int compression_level) {
  const HistogramFile f = parse_histogram_file(bytes.data(), bytes.size());
  H5Handle group(H5Gcreate2(on, group_name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Gclose, group_name.c_str());
  attr(group.get(), "run_id", f.header.run_id);
  attr(group.get(), "created_unix_ns", f.header.created_unix_ns);
  attr(group.get(), "tick_ps", f.header.tick_ps);
  attr(group.get(), "metadata_json", std::string(f.metadata));
  for (const HistDescriptor& d : f.descriptors) {
    const std::string name(d.name_view());
    const std::vector<hsize_t> dims(d.shape, d.shape + d.rank);
    // Counts are unsigned; estimates (histogram format version 2) are IEEE doubles.
    const hid_t type = d.is_real() ? H5T_IEEE_F64LE
                       : d.element_bytes == 4 ? H5T_STD_U32LE
                                              : H5T_STD_U64LE;
    H5Handle space(H5Screate_simple(int(d.rank), dims.data(), nullptr), H5Sclose, name.c_str());
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
    // Dense attribute storage: the bin edges of a per-crystal axis pass HDF5's 64 KiB limit
    // for attributes kept in the object header.
    check_status(H5Pset_attr_phase_change(dcpl.get(), 0, 0), "attribute storage");
    if (d.elements() > 0 && compression_level > 0) {
      // Chunks of at most 1 MiB, cut along the leading axes (flood maps, spectra per crystal).
      std::vector<hsize_t> chunk = dims;
      std::uint64_t chunk_bytes = d.elements() * d.element_bytes;
      for (std::size_t k = 0; k < chunk.size() && chunk_bytes > (1u << 20); ++k) {
        const std::uint64_t row = chunk_bytes / chunk[k];
        chunk[k] = std::max<hsize_t>(1, (1u << 20) / row);
        chunk_bytes = row * chunk[k];
      }
      check_status(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()), "chunking");
      check_status(H5Pset_shuffle(dcpl.get()), "shuffle filter");
      check_status(H5Pset_deflate(dcpl.get(), unsigned(compression_level)), "deflate filter");
    }
    H5Handle set(H5Dcreate2(group.get(), name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(),
                            H5P_DEFAULT),
                 H5Dclose, name.c_str());
    // The bins are little-endian in the file: HDF5 converts them if this machine is not.
    if (d.elements() > 0)
      check_status(H5Dwrite(set.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                            bytes.data() + d.data_offset),
                    name);
    attr(set.get(), "unit", std::string(d.unit_view()));
    attr(set.get(), "lo", d.lo);
    attr(set.get(), "width", d.width);
    std::vector<double> edges(std::size_t{d.shape[d.rank - 1]} + 1);
    for (std::size_t i = 0; i < edges.size(); ++i) edges[i] = d.lo + double(i) * d.width;
    attr(set.get(), "bin_edges", edges);
  }
}

}  // namespace

H5Handle::H5Handle(hid_t id, Closer close, const char* what) : id_(check(id, what)), close_(close) {}

H5Handle& H5Handle::operator=(H5Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void H5Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

Hdf5Writer::Hdf5Writer(const std::filesystem::path& file, const PlmHeader& header,
                       const Settings& settings, const std::string& config_text,
                       int compression_level, const Corrections& corrections)
    : path_(file),
      settings_(settings),
      corrections_(corrections),
      crystal_count_(header.crystal_count),
      tick_ps_(header.tick_ps),
      compression_level_(compression_level) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions naming the step
  // The 1.8 file format (read by every HDF5 since 2008): dense attribute storage for the
  // histograms' bin edges.
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  check_status(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
               "file format version");
  file_ = H5Handle(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                   ("create " + file.string()).c_str());
  record_mem_type_ = record_type(false);
  record_file_type_ = record_type(true);
  const hid_t root = file_.get();
  attr(root, "format", std::string("petdaq-export hdf5 1"));
  attr(root, "petdaq_version", std::string(PETDAQ_VERSION));
  attr(root, "tick_ps", header.tick_ps);
  attr(root, "crystal_count", std::uint64_t{header.crystal_count});
  attr(root, "crystals_per_ring", std::uint64_t{header.crystals_per_ring});
  attr(root, "settings_hash", header.settings_hash);
  attr(root, "created_unix_ns", header.created_unix_ns);

  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
  const hsize_t chunk = kChunkRecords;
  check_status(H5Pset_chunk(dcpl.get(), 1, &chunk), "chunking");
  check_status(H5Pset_shuffle(dcpl.get()), "shuffle filter");
  check_status(H5Pset_deflate(dcpl.get(), unsigned(compression_level)), "deflate filter");
  for (auto [name, stream] : {std::pair{"prompts", &prompts_}, std::pair{"delayed", &delayed_}}) {
    const hsize_t zero = 0, unlimited = H5S_UNLIMITED;
    H5Handle space(H5Screate_simple(1, &zero, &unlimited), H5Sclose, name);
    stream->dataset = H5Handle(H5Dcreate2(root, name, record_file_type_.get(), space.get(),
                                          H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                               H5Dclose, name);
    stream->buffer.reserve(kChunkRecords);
  }

  // Per record, row for row with `prompts` and `delayed`: the signed Δt, and for prompts the
  // corrections where known (docs/export.md, "Corrections").
  prompts_dt_ = make_column(root, "prompts_signed_dt_ps");
  delayed_dt_ = make_column(root, "delayed_signed_dt_ps");
  for (const char* name : {"prompts_signed_dt_ps", "delayed_signed_dt_ps"}) {
    H5Handle d(H5Dopen2(root, name, H5P_DEFAULT), H5Dclose, name);
    attr(d.get(), "convention",
         std::string("t(lower crystal id) - t(higher crystal id), ps (DESIGN section 5)"));
  }
  corrections_group_ = H5Handle(H5Gcreate2(root, "corrections", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                H5Gclose, "corrections");
  if (corrections.normalization || corrections.live.live_fraction() < 1.0)
    prompts_norm_ = make_column(corrections_group_.get(), "prompts_normalization");
  if (corrections.randoms) prompts_randoms_ = make_column(corrections_group_.get(), "prompts_randoms_per_s");

  H5Handle group(H5Gcreate2(root, "settings", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                 "settings");
  attr(group.get(), "config_yaml", config_text);
  attr(group.get(), "coincidence_window_ps", settings.coincidence.window_ps);
  attr(group.get(), "energy_window_low_keV", settings.energy_window.low_keV);
  attr(group.get(), "energy_window_high_keV", settings.energy_window.high_keV);
  attr(group.get(), "delayed_offset_ps", settings.coincidence.delayed.offset_ps);
}

void Hdf5Writer::flush(Stream& s) {
  if (s.buffer.empty()) return;
  const hsize_t n = s.buffer.size(), total = s.written + n, start = s.written;
  check_status(H5Dset_extent(s.dataset.get(), &total), "extend");
  H5Handle file_space(H5Dget_space(s.dataset.get()), H5Sclose, "file space");
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr),
               "select");
  H5Handle mem_space(H5Screate_simple(1, &n, nullptr), H5Sclose, "memory space");
  check_status(H5Dwrite(s.dataset.get(), record_mem_type_.get(), mem_space.get(), file_space.get(),
                        H5P_DEFAULT, s.buffer.data()),
               "write " + path_.string());
  s.written = total;
  s.buffer.clear();
}

Hdf5Writer::Column Hdf5Writer::make_column(hid_t on, const char* name) {
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
  const hsize_t chunk = kChunkRecords, zero = 0, unlimited = H5S_UNLIMITED;
  check_status(H5Pset_chunk(dcpl.get(), 1, &chunk), "chunking");
  if (compression_level_ > 0) {
    check_status(H5Pset_shuffle(dcpl.get()), "shuffle filter");
    check_status(H5Pset_deflate(dcpl.get(), unsigned(compression_level_)), "deflate filter");
  }
  H5Handle space(H5Screate_simple(1, &zero, &unlimited), H5Sclose, name);
  Column c;
  c.dataset = H5Handle(H5Dcreate2(on, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(),
                                  H5P_DEFAULT),
                       H5Dclose, name);
  c.buffer.reserve(kChunkRecords);
  return c;
}

void Hdf5Writer::flush(Column& c) {
  if (c.buffer.empty() || c.dataset.get() < 0) return;
  const hsize_t n = c.buffer.size(), total = c.written + n, start = c.written;
  check_status(H5Dset_extent(c.dataset.get(), &total), "extend");
  H5Handle file_space(H5Dget_space(c.dataset.get()), H5Sclose, "file space");
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr),
               "select");
  H5Handle mem_space(H5Screate_simple(1, &n, nullptr), H5Sclose, "memory space");
  check_status(H5Dwrite(c.dataset.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                        H5P_DEFAULT, c.buffer.data()),
               "write " + path_.string());
  c.written = total;
  c.buffer.clear();
}

void Hdf5Writer::add(const MessageHeader& m, const CoincRecord* records, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) check_crystals(records[i], crystal_count_, m, i);
  messages_.push_back(m);
  const bool delayed = m.kind == static_cast<std::uint16_t>(MessageKind::delayed);
  Stream& s = delayed ? delayed_ : prompts_;
  Column& dt = delayed ? delayed_dt_ : prompts_dt_;
  const double live = corrections_.live.live_fraction();
  for (std::size_t i = 0; i < n; ++i) {
    const CoincRecord& r = records[i];
    s.buffer.push_back(r);
    from_multiple_[delayed] += (r.flags & coinc_flag::from_multiple) != 0;
    dt.buffer.push_back(float(double(signed_dt_ticks(r)) * tick_ps_));
    if (!delayed) {
      const std::uint32_t lo = tof_lower_crystal(r), hi = tof_higher_crystal(r);
      if (prompts_norm_.dataset.get() >= 0) {
        const double eff = corrections_.normalization ? corrections_.normalization->efficiency(lo, hi) : 1.0;
        prompts_norm_.buffer.push_back(float(1.0 / (eff * live)));
      }
      if (corrections_.randoms) prompts_randoms_.buffer.push_back(float(corrections_.randoms->per_s(lo, hi)));
    }
    if (s.buffer.size() == kChunkRecords) {
      flush(s);
      flush(dt);
      if (!delayed) {
        flush(prompts_norm_);
        flush(prompts_randoms_);
      }
    }
  }
}

void Hdf5Writer::add_singles(const MessageHeader& m, const Single* singles, std::size_t n) {
  messages_.push_back(m);
  ++single_messages_;
  if (singles_dataset_.get() < 0) {
    single_mem_type_ = single_type(false);
    single_file_type_ = single_type(true);
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dataset properties");
    const hsize_t chunk = kChunkRecords, zero = 0, unlimited = H5S_UNLIMITED;
    check_status(H5Pset_chunk(dcpl.get(), 1, &chunk), "chunking");
    check_status(H5Pset_shuffle(dcpl.get()), "shuffle filter");
    check_status(H5Pset_deflate(dcpl.get(), unsigned(compression_level_)), "deflate filter");
    H5Handle space(H5Screate_simple(1, &zero, &unlimited), H5Sclose, "singles");
    singles_dataset_ = H5Handle(H5Dcreate2(file_.get(), "singles", single_file_type_.get(),
                                           space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                H5Dclose, "singles");
    singles_buffer_.reserve(kChunkRecords);
  }
  for (std::size_t i = 0; i < n; ++i) {
    singles_buffer_.push_back(singles[i]);
    if (singles_buffer_.size() == kChunkRecords) flush_singles();
  }
}

void Hdf5Writer::flush_singles() {
  if (singles_buffer_.empty()) return;
  const hsize_t n = singles_buffer_.size(), total = singles_written_ + n, start = singles_written_;
  check_status(H5Dset_extent(singles_dataset_.get(), &total), "extend");
  H5Handle file_space(H5Dget_space(singles_dataset_.get()), H5Sclose, "file space");
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr),
               "select");
  H5Handle mem_space(H5Screate_simple(1, &n, nullptr), H5Sclose, "memory space");
  check_status(H5Dwrite(singles_dataset_.get(), single_mem_type_.get(), mem_space.get(),
                        file_space.get(), H5P_DEFAULT, singles_buffer_.data()),
               "write " + path_.string());
  singles_written_ = total;
  singles_buffer_.clear();
}

void Hdf5Writer::add_histograms(std::vector<std::uint8_t> bytes) {
  const std::uint64_t run_id = parse_histogram_file(bytes.data(), bytes.size()).header.run_id;
  histograms_[run_id] = std::move(bytes);
  last_histogram_run_ = run_id;
}

void Hdf5Writer::finish(const std::string& source) {
  flush(prompts_);
  flush(delayed_);
  for (Column* c : {&prompts_dt_, &delayed_dt_, &prompts_norm_, &prompts_randoms_}) flush(*c);
  flush_singles();
  const hid_t root = file_.get();
  {
    const hid_t g = corrections_group_.get();
    const LiveTime& live = corrections_.live;
    attr(g, "live_fraction", live.live_fraction());
    attr(g, "live_time_known", std::uint64_t{corrections_.live_known});
    attr(g, "acquisition_s", live.acquisition_s);
    attr(g, "dead_time_s", live.dead_s);
    attr(g, "dead_intervals", live.dead_intervals);
    attr(g, "normalization_factor",
         std::string(corrections_.normalization ? "1 / (LOR efficiency * live_fraction), CASToR's convention"
                     : corrections_.live.live_fraction() < 1.0
                         ? "1 / live_fraction (no normalisation table given)"
                         : "none (no normalisation table given, no dead time)"));
    attr(g, "randoms_model",
         std::string(!corrections_.randoms ? "none (no histogram file given)"
                     : corrections_.randoms->model() == PairRandoms::Model::singles_prompts
                         ? "singles_rate_scaled_to_singles_prompts"
                         : "singles_rate"));
    if (corrections_.randoms) attr(g, "randoms_total_per_s", corrections_.randoms->total_per_s());
  }
  attr(root, "source", source);
  // The last run's histograms are `histograms`; an earlier run's, `histograms_run<run_id>`.
  for (const auto& [run_id, bytes] : histograms_)
    write_histograms(root,
                     run_id == last_histogram_run_ ? "histograms"
                                                   : "histograms_run" + std::to_string(run_id),
                     bytes, compression_level_);

  // The message headers, one row per message in file order.
  struct MessageRow {
    std::uint16_t kind;
    std::uint64_t message_id, run_id, slice_id, t_begin, t_end;
    std::uint32_t record_count;
  };
  std::vector<MessageRow> rows;
  std::set<std::uint64_t> runs;
  std::uint64_t messages[2] = {};
  for (const MessageHeader& m : messages_) {
    rows.push_back({m.kind, m.message_id, m.run_id, m.slice_id, m.t_begin, m.t_end, m.record_count});
    runs.insert(m.run_id);
    if (m.kind == static_cast<std::uint16_t>(MessageKind::prompts) ||
        m.kind == static_cast<std::uint16_t>(MessageKind::delayed))
      ++messages[m.kind == static_cast<std::uint16_t>(MessageKind::delayed)];
  }
  {
    H5Handle mem(H5Tcreate(H5T_COMPOUND, sizeof(MessageRow)), H5Tclose, "message type");
    H5Handle disk(H5Tcreate(H5T_COMPOUND, 2 + 5 * 8 + 4), H5Tclose, "message type");
    std::size_t at = 0;
    auto member = [&](const char* name, std::size_t offset, hid_t native, hid_t le, std::size_t size) {
      check_status(H5Tinsert(mem.get(), name, offset, native), name);
      check_status(H5Tinsert(disk.get(), name, at, le), name);
      at += size;
    };
    member("kind", offsetof(MessageRow, kind), H5T_NATIVE_UINT16, H5T_STD_U16LE, 2);
    member("message_id", offsetof(MessageRow, message_id), H5T_NATIVE_UINT64, H5T_STD_U64LE, 8);
    member("run_id", offsetof(MessageRow, run_id), H5T_NATIVE_UINT64, H5T_STD_U64LE, 8);
    member("slice_id", offsetof(MessageRow, slice_id), H5T_NATIVE_UINT64, H5T_STD_U64LE, 8);
    member("t_begin", offsetof(MessageRow, t_begin), H5T_NATIVE_UINT64, H5T_STD_U64LE, 8);
    member("t_end", offsetof(MessageRow, t_end), H5T_NATIVE_UINT64, H5T_STD_U64LE, 8);
    member("record_count", offsetof(MessageRow, record_count), H5T_NATIVE_UINT32, H5T_STD_U32LE, 4);
    dataset(root, "messages", mem.get(), disk.get(), rows, {rows.size()});
  }

  H5Handle counts(H5Gcreate2(root, "counts", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                  "counts");
  attr(counts.get(), "prompts", prompts_.written);
  attr(counts.get(), "delayed", delayed_.written);
  attr(counts.get(), "prompts_from_multiples", from_multiple_[0]);
  attr(counts.get(), "delayed_from_multiples", from_multiple_[1]);
  attr(counts.get(), "prompt_messages", messages[0]);
  attr(counts.get(), "delayed_messages", messages[1]);
  attr(counts.get(), "runs", std::uint64_t{runs.size()});
  if (single_messages_) {
    attr(counts.get(), "singles", singles_written_);
    attr(counts.get(), "single_messages", single_messages_);
  }

  const ScannerSettings& s = settings_.scanner;
  const Geometry g = Geometry::from(s);
  const std::uint32_t n = g.crystal_count();
  std::vector<double> position(std::size_t{n} * 3);
  std::vector<std::uint32_t> ring(n), sector(n), in_ring(n);
  for (std::uint32_t c = 0; c < n; ++c) {
    const CrystalPlace p = crystal_place(s, c);
    for (int k = 0; k < 3; ++k) position[std::size_t{c} * 3 + k] = p.centre_mm[k];
    ring[c] = c / g.crystals_per_ring();
    in_ring[c] = c % g.crystals_per_ring();
    sector[c] = in_ring[c] / (g.du_transaxial * g.crystal_transaxial);
  }
  H5Handle geo(H5Gcreate2(root, "geometry", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
               "geometry");
  dataset(geo.get(), "crystal_position_mm", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, position, {n, 3});
  dataset(geo.get(), "ring", H5T_NATIVE_UINT32, H5T_STD_U32LE, ring, {n});
  dataset(geo.get(), "sector", H5T_NATIVE_UINT32, H5T_STD_U32LE, sector, {n});
  dataset(geo.get(), "crystal_in_ring", H5T_NATIVE_UINT32, H5T_STD_U32LE, in_ring, {n});
  using Count = std::pair<const char*, std::uint32_t>;
  using Length = std::pair<const char*, double>;
  for (auto [name, v] : std::initializer_list<Count>{{"bdm_transaxial", s.bdm_transaxial}, {"bdm_axial", s.bdm_axial},
                         {"du_transaxial", s.du_transaxial}, {"du_axial", s.du_axial},
                         {"crystal_transaxial", s.crystal_transaxial},
                         {"crystal_axial", s.crystal_axial}})
    attr(geo.get(), name, std::uint64_t{v});
  for (auto [name, v] : std::initializer_list<Length>{{"ring_radius_mm", s.ring_radius_mm},
                         {"crystal_pitch_transaxial_mm", s.crystal_pitch_transaxial_mm},
                         {"crystal_pitch_axial_mm", s.crystal_pitch_axial_mm},
                         {"crystal_depth_mm", s.crystal_depth_mm}, {"du_gap_mm", s.du_gap_mm},
                         {"bdm_gap_mm", s.bdm_gap_mm}})
    attr(geo.get(), name, v);
  prompts_.dataset.reset();
  delayed_.dataset.reset();
  for (Column* c : {&prompts_dt_, &delayed_dt_, &prompts_norm_, &prompts_randoms_}) c->dataset.reset();
  corrections_group_.reset();
  singles_dataset_.reset();
  single_mem_type_.reset();
  single_file_type_.reset();
  record_mem_type_.reset();
  record_file_type_.reset();
  counts.reset();
  geo.reset();
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
    throw std::runtime_error(path_.string() + ": HDF5 flush failed");
  file_.reset();
}

}  // namespace petdaq::exporter
