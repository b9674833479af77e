#include "core/calibration.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/settings.h"

namespace petdaq {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr std::size_t kNpyMagicBytes = 6;

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) s += shape.size() == 1 ? "," : ", ";
  }
  return s + ")";
}

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& why) {
  throw CalibrationError(file.string() + ": " + why);
}

// The value of 'key' in NumPy's header dictionary, as text up to the next top-level comma.
std::string header_value(const std::string& header, const std::string& key,
                         const std::filesystem::path& file) {
  const std::string quoted = "'" + key + "'";
  auto k = header.find(quoted);
  if (k == std::string::npos) fail(file, "not a .npy file: header has no " + quoted);
  auto colon = header.find(':', k + quoted.size());
  if (colon == std::string::npos) fail(file, "not a .npy file: malformed header");
  std::size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  std::size_t end = i;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' || c == '}') && depth == 0) break;
  }
  return header.substr(i, end - i);
}

std::size_t dtype_size(const std::string& dtype) {
  if (dtype.size() < 3) return 0;
  const char kind = dtype[1];
  if (kind != 'u' && kind != 'i' && kind != 'f') return 0;
  const std::string digits = dtype.substr(2);
  if (digits != "1" && digits != "2" && digits != "4" && digits != "8") return 0;
  return static_cast<std::size_t>(std::stoul(digits));
}

// '|u1' and '<u1' are the same one-byte type; NumPy writes the first.
std::string canonical_dtype(const std::string& d) {
  if (d.size() == 3 && d[2] == '1' && (d[0] == '<' || d[0] == '|' || d[0] == '>'))
    return std::string("|") + d.substr(1);
  return d;
}

}  // namespace

std::size_t NpyArray::element_count() const {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

NpyArray read_npy(const std::filesystem::path& file) {
  if (const std::string why = not_a_regular_file(file); !why.empty()) fail(file, why);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_bytes = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);

  char preamble[10];
  if (file_bytes < sizeof preamble || !in.read(preamble, sizeof preamble))
    fail(file, "not a .npy file: shorter than the 10-byte preamble");
  if (std::memcmp(preamble, kNpyMagic, kNpyMagicBytes) != 0)
    fail(file, "not a .npy file: bad magic (expected \\x93NUMPY)");
  const int major = static_cast<unsigned char>(preamble[6]);
  const int minor = static_cast<unsigned char>(preamble[7]);
  std::uint64_t header_len = 0;
  std::uint64_t header_start = 10;
  if (major == 1) {
    header_len = static_cast<unsigned char>(preamble[8]) |
                 (static_cast<unsigned>(static_cast<unsigned char>(preamble[9])) << 8);
  } else if (major == 2 || major == 3) {
    char extra[2];
    if (!in.read(extra, 2)) fail(file, "truncated header");
    header_len = static_cast<unsigned char>(preamble[8]) |
                 (std::uint64_t{static_cast<unsigned char>(preamble[9])} << 8) |
                 (std::uint64_t{static_cast<unsigned char>(extra[0])} << 16) |
                 (std::uint64_t{static_cast<unsigned char>(extra[1])} << 24);
    header_start = 12;
  } else {
    fail(file, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (1.0 expected)");
  }
  if (header_start + header_len > file_bytes)
    fail(file, "truncated: the header claims " + std::to_string(header_len) +
                   " bytes, the file is " + std::to_string(file_bytes) + " bytes");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));

  NpyArray a;
  std::string descr = header_value(header, "descr", file);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    fail(file, "malformed descr " + descr);
  a.dtype = canonical_dtype(descr.substr(1, descr.size() - 2));
  const std::size_t item = dtype_size(a.dtype);
  if (item == 0) fail(file, "unsupported dtype '" + a.dtype + "'");
  if (item > 1 && a.dtype[0] != '<')
    fail(file, "dtype '" + a.dtype + "' is not little-endian");
  if (header_value(header, "fortran_order", file) != "False")
    fail(file, "Fortran-ordered arrays are not supported (save with C order)");

  const std::string shape = header_value(header, "shape", file);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    fail(file, "malformed shape " + shape);
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    dim.erase(std::remove(dim.begin(), dim.end(), ' '), dim.end());
    if (dim.empty()) continue;
    if (dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 12)
      fail(file, "malformed shape " + shape);
    a.shape.push_back(static_cast<std::size_t>(std::stoull(dim)));
  }

  // Checked product: dimensions that wrap 64 bits must not pass for a small array.
  std::uint64_t data_bytes = item;
  for (const std::size_t d : a.shape) {
    if (d != 0 && data_bytes > std::numeric_limits<std::uint64_t>::max() / d)
      fail(file, "shape " + shape_text(a.shape) + " is too large");
    data_bytes *= d;
  }
  const std::uint64_t available = file_bytes - header_start - header_len;
  if (available < data_bytes)
    fail(file, "truncated: shape " + shape_text(a.shape) + " of '" + a.dtype + "' needs " +
                   std::to_string(data_bytes) + " bytes of data, the file holds " +
                   std::to_string(available));
  if (available > data_bytes)
    fail(file, "has " + std::to_string(available - data_bytes) +
                   " bytes after the data of shape " + shape_text(a.shape));
  a.data.resize(data_bytes);
  if (data_bytes && !in.read(reinterpret_cast<char*>(a.data.data()),
                             static_cast<std::streamsize>(data_bytes)))
    fail(file, "read error");
  return a;
}

void write_npy(const std::filesystem::path& file, const std::string& dtype,
               const std::vector<std::size_t>& shape, const void* data, std::size_t bytes) {
  std::string header = "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': " +
                       shape_text(shape) + ", }";
  // Pad so that the data starts on a 64-byte boundary, ending the header with '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 65535) throw CalibrationError(file.string() + ": header too long");
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail(file, std::string("cannot create: ") + std::strerror(errno));
  out.write(kNpyMagic, kNpyMagicBytes);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char len[2] = {static_cast<char>(header.size() & 0xFF),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) fail(file, "write error");
}

template <class T>
std::vector<T> read_npy_checked(const std::filesystem::path& file,
                                const std::vector<std::size_t>& expected_shape) {
  NpyArray a = read_npy(file);
  if (a.dtype != NpyDtype<T>::name)
    fail(file, "dtype '" + a.dtype + "', expected '" + NpyDtype<T>::name + "'");
  if (a.shape != expected_shape)
    fail(file, "shape " + shape_text(a.shape) + ", expected " + shape_text(expected_shape));
  std::vector<T> v(a.element_count());
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

template std::vector<std::uint8_t> read_npy_checked(const std::filesystem::path&,
                                                    const std::vector<std::size_t>&);
template std::vector<float> read_npy_checked(const std::filesystem::path&,
                                             const std::vector<std::size_t>&);
template std::vector<std::int32_t> read_npy_checked(const std::filesystem::path&,
                                                    const std::vector<std::size_t>&);

Calibration load_calibration(const Settings& settings) {
  static_assert(std::endian::native == std::endian::little,
                ".npy tables are little-endian and copied as they are");
  const Geometry g = Geometry::from(settings.scanner);
  const auto& paths = settings.calibration;
  if (paths.position_lut.empty())
    throw CalibrationError("calibration.position_lut: not set (required)");
  if (paths.energy_correction.empty())
    throw CalibrationError("calibration.energy_correction: not set (required)");

  Calibration cal;
  cal.energy_bin_width = paths.energy_bin_width;
  cal.position_lut = read_npy_checked<std::uint8_t>(
      paths.position_lut, {g.bdm_count(), g.du_per_bdm(), g.position_size, g.position_size});

  NpyArray energy = read_npy(paths.energy_correction);
  if (energy.dtype != NpyDtype<float>::name)
    fail(paths.energy_correction,
         "dtype '" + energy.dtype + "', expected '" + NpyDtype<float>::name + "'");
  const std::vector<std::size_t> want = {g.bdm_count(), g.du_per_bdm(), g.crystals_per_du()};
  if (energy.shape.size() != 4 || !std::equal(want.begin(), want.end(), energy.shape.begin()) ||
      energy.shape[3] == 0 || energy.shape[3] > std::numeric_limits<std::uint32_t>::max())
    fail(paths.energy_correction, "shape " + shape_text(energy.shape) + ", expected (" +
                                      std::to_string(want[0]) + ", " + std::to_string(want[1]) +
                                      ", " + std::to_string(want[2]) + ", bins)");
  cal.energy_bins = static_cast<std::uint32_t>(energy.shape[3]);
  cal.energy_correction.resize(energy.element_count());
  std::memcpy(cal.energy_correction.data(), energy.data.data(), energy.data.size());

  if (!paths.time_offsets.empty()) {
    cal.time_offsets = read_npy_checked<std::int32_t>(paths.time_offsets, {g.crystal_count()});
    const auto [lo, hi] = std::minmax_element(cal.time_offsets.begin(), cal.time_offsets.end());
    cal.min_time_offset = std::min<std::int32_t>(0, *lo);
    cal.max_time_offset = std::max<std::int32_t>(0, *hi);
  }
  if (!paths.dead_time.empty()) cal.dead_time = load_dead_time_model(paths.dead_time, g.bdm_count());
  return cal;
}

}  // namespace petdaq
