// .npy tables and calibration loading (DESIGN section 3), under AddressSanitizer: every
// refusal names the file and what was expected and found.
#include "core/calibration.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/settings.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dir.h"

// Undefined behaviour fails the test instead of printing a warning and going on.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

namespace petdaq {
namespace {

namespace fs = std::filesystem;

// A .npy file with a hand-written header dictionary, padded the way NumPy pads it.
void write_raw_npy(const fs::path& p, std::string dict, const std::vector<std::uint8_t>& data,
                   std::uint8_t major = 1) {
  const std::size_t preamble = major == 1 ? 10 : 12;
  dict.append((64 - (preamble + dict.size() + 1) % 64) % 64, ' ');
  dict.push_back('\n');
  std::ofstream out(p, std::ios::binary);
  out.write("\x93NUMPY", 6);
  out.put(static_cast<char>(major));
  out.put(0);
  out.put(static_cast<char>(dict.size() & 0xFF));
  out.put(static_cast<char>(dict.size() >> 8));
  if (major != 1) {
    out.put(0);
    out.put(0);
  }
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// The message `f` throws CalibrationError with ("" when it does not throw).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const CalibrationError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Npy, FileIsWhatNumPyReads) {
  test::ScratchDir dir;
  const fs::path p = dir / "a.npy";
  write_npy<float>(p, {2, 3}, {1.f, 2.f, 3.f, 4.f, 5.f, -0.5f});
  const auto bytes = test::read_bytes(p);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(std::memcmp(bytes.data(), "\x93NUMPY", 6), 0);
  EXPECT_EQ(bytes[6], 1);  // format version 1.0
  EXPECT_EQ(bytes[7], 0);
  const std::size_t header_len = bytes[8] | (std::size_t{bytes[9]} << 8);
  const std::size_t data_start = 10 + header_len;
  EXPECT_EQ(data_start % 64, 0u);
  ASSERT_EQ(bytes.size(), data_start + 6 * 4);
  const std::string header(bytes.begin() + 10, bytes.begin() + static_cast<long>(data_start));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u)
      << header;
  // The data are the floats, little-endian, C order.
  float last;
  std::memcpy(&last, bytes.data() + data_start + 5 * 4, 4);
  EXPECT_EQ(last, -0.5f);

  write_npy<std::int32_t>(p, {5}, {1, 2, 3, 4, 5});
  const auto one_d = test::read_bytes(p);
  const std::string h1(one_d.begin() + 10, one_d.begin() + 10 + (one_d[8] | (one_d[9] << 8)));
  EXPECT_TRUE(contains(h1, "'shape': (5,)")) << h1;  // a 1-tuple keeps its comma
  EXPECT_EQ((10 + h1.size()) % 64, 0u);
}

TEST(Npy, RoundTripUint8Float32Int32) {
  test::ScratchDir dir;
  const std::vector<std::uint8_t> u8 = {0, 1, 2, 254, 255, 7};
  write_npy<std::uint8_t>(dir / "u8.npy", {1, 2, 3}, u8);
  EXPECT_EQ(read_npy_checked<std::uint8_t>(dir / "u8.npy", {1, 2, 3}), u8);
  const NpyArray a = read_npy(dir / "u8.npy");
  EXPECT_EQ(a.dtype, "|u1");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(a.element_count(), 6u);

  const std::vector<float> f32 = {0.f, -1.5f, 3.25e10f, 1e-30f};
  write_npy<float>(dir / "f32.npy", {4}, f32);
  EXPECT_EQ(read_npy_checked<float>(dir / "f32.npy", {4}), f32);

  const std::vector<std::int32_t> i32 = {INT32_MIN, -1, 0, 1, INT32_MAX, 42};
  write_npy<std::int32_t>(dir / "i32.npy", {3, 2}, i32);
  EXPECT_EQ(read_npy_checked<std::int32_t>(dir / "i32.npy", {3, 2}), i32);

  // Many dimensions and an empty array.
  std::vector<float> big(2 * 3 * 4 * 5);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.25f;
  write_npy<float>(dir / "4d.npy", {2, 3, 4, 5}, big);
  EXPECT_EQ(read_npy_checked<float>(dir / "4d.npy", {2, 3, 4, 5}), big);
  write_npy<float>(dir / "empty.npy", {0, 3}, {});
  EXPECT_TRUE(read_npy_checked<float>(dir / "empty.npy", {0, 3}).empty());
}

TEST(Npy, ReadsOtherByteOrderSpellingsOfOneByteTypes) {
  test::ScratchDir dir;
  write_raw_npy(dir / "u1.npy", "{'descr': '<u1', 'fortran_order': False, 'shape': (2,), }", {9, 8});
  EXPECT_EQ(read_npy_checked<std::uint8_t>(dir / "u1.npy", {2}), (std::vector<std::uint8_t>{9, 8}));
  // Keys in another order, as other writers may put them.
  write_raw_npy(dir / "order.npy", "{'shape': (1, 1), 'fortran_order': False, 'descr': '|u1'}", {3});
  EXPECT_EQ(read_npy_checked<std::uint8_t>(dir / "order.npy", {1, 1}), (std::vector<std::uint8_t>{3}));
}

// A directory or a device given as a table is named as such, not read as a short file.
TEST(Npy, ADirectoryOrADeviceIsRefusedAsSuch) {
  test::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  for (const std::filesystem::path& p : {dir, std::filesystem::path("/dev/zero")}) {
    try {
      read_npy(p);
      ADD_FAILURE() << p << " was read";
    } catch (const CalibrationError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(p.string()), std::string::npos) << what;
      EXPECT_NE(what.find(p == dir ? "is a directory" : "not a regular file"), std::string::npos)
          << what;
      EXPECT_EQ(what.find("preamble"), std::string::npos) << what;
    }
  }
}

TEST(Npy, WrongShapeIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "shape.npy";
  write_npy<float>(p, {2, 3}, std::vector<float>(6));
  const std::string e = refusal([&] { read_npy_checked<float>(p, {3, 2}); });
  EXPECT_EQ(e, p.string() + ": shape (2, 3), expected (3, 2)");
  const std::string e1 = refusal([&] { read_npy_checked<float>(p, {6}); });
  EXPECT_EQ(e1, p.string() + ": shape (2, 3), expected (6,)");
}

TEST(Npy, WrongDtypeIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "dtype.npy";
  write_npy<std::int32_t>(p, {4}, {1, 2, 3, 4});
  EXPECT_EQ(refusal([&] { read_npy_checked<float>(p, {4}); }),
            p.string() + ": dtype '<i4', expected '<f4'");
  write_raw_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", std::vector<std::uint8_t>(8));
  EXPECT_EQ(refusal([&] { read_npy_checked<float>(p, {1}); }),
            p.string() + ": dtype '<f8', expected '<f4'");
  write_raw_npy(p, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::vector<std::uint8_t>(4));
  EXPECT_TRUE(contains(refusal([&] { read_npy(p); }), "is not little-endian"));
  write_raw_npy(p, "{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }", std::vector<std::uint8_t>(16));
  EXPECT_EQ(refusal([&] { read_npy(p); }), p.string() + ": unsupported dtype '<U4'");
}

TEST(Npy, TruncatedDataIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "short.npy";
  write_npy<float>(p, {2, 3}, std::vector<float>(6, 1.f));
  fs::resize_file(p, fs::file_size(p) - 1);
  const std::string e = refusal([&] { read_npy(p); });
  EXPECT_EQ(e, p.string() + ": truncated: shape (2, 3) of '<f4' needs 24 bytes of data, the file holds 23");
  // A cut inside the header.
  fs::resize_file(p, 40);
  EXPECT_TRUE(contains(refusal([&] { read_npy(p); }), p.string() + ": truncated: the header claims"));
  fs::resize_file(p, 5);
  EXPECT_EQ(refusal([&] { read_npy(p); }),
            p.string() + ": not a .npy file: shorter than the 10-byte preamble");
}

TEST(Npy, ExtraBytesAfterTheDataAreRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "long.npy";
  write_raw_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", {1, 2, 3});
  EXPECT_EQ(refusal([&] { read_npy(p); }), p.string() + ": has 1 bytes after the data of shape (2,)");
}

TEST(Npy, BadMagicIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "magic.npy";
  std::ofstream(p, std::ios::binary) << "PK\x03\x04 this is a zip file, not an array";
  EXPECT_EQ(refusal([&] { read_npy(p); }),
            p.string() + ": not a .npy file: bad magic (expected \\x93NUMPY)");
}

TEST(Npy, UnsupportedVersionIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "v4.npy";
  write_raw_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", {1}, 4);
  EXPECT_EQ(refusal([&] { read_npy(p); }),
            p.string() + ": unsupported .npy format version 4.0 (1.0 expected)");
  // Version 2.0 (4-byte header length) is read.
  write_raw_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", {6}, 2);
  EXPECT_EQ(read_npy_checked<std::uint8_t>(p, {1}), std::vector<std::uint8_t>{6});
}

TEST(Npy, FortranOrderIsRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "fortran.npy";
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::vector<std::uint8_t>(16));
  EXPECT_EQ(refusal([&] { read_npy(p); }),
            p.string() + ": Fortran-ordered arrays are not supported (save with C order)");
}

TEST(Npy, MalformedHeadersAreRefused) {
  test::ScratchDir dir;
  const fs::path p = dir / "bad.npy";
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False}", {});
  EXPECT_EQ(refusal([&] { read_npy(p); }), p.string() + ": not a .npy file: header has no 'shape'");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", {});
  EXPECT_EQ(refusal([&] { read_npy(p); }), p.string() + ": malformed shape (2, x)");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", {});
  EXPECT_EQ(refusal([&] { read_npy(p); }), p.string() + ": malformed shape (-2,)");
  // Dimensions whose product wraps 64 bits must not pass for a small array.
  write_raw_npy(p, "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", {});
  EXPECT_TRUE(contains(refusal([&] { read_npy(p); }), p.string() + ": shape (4294967296, 4294967296)"));
  EXPECT_TRUE(contains(refusal([&] { read_npy(dir / "missing.npy"); }),
                       (dir / "missing.npy").string() + ": cannot open"));
}

// ---- load_calibration ----

struct Tables {
  test::ScratchDir dir;
  Settings settings;
  Geometry g;

  Tables() {
    settings.scanner.bdm_transaxial = 3;
    settings.scanner.bdm_axial = 2;
    settings.scanner.du_transaxial = 1;
    settings.scanner.du_axial = 2;
    settings.scanner.crystal_transaxial = 2;
    settings.scanner.crystal_axial = 3;
    settings.scanner.position_size = 4;
    g = Geometry::from(settings.scanner);
    settings.calibration.position_lut = dir / "lut.npy";
    settings.calibration.energy_correction = dir / "energy.npy";
    settings.calibration.energy_bin_width = 7;
    std::vector<std::uint8_t> lut(std::size_t{6} * 2 * 4 * 4);
    for (std::size_t i = 0; i < lut.size(); ++i) lut[i] = static_cast<std::uint8_t>(i % 7);
    write_npy<std::uint8_t>(settings.calibration.position_lut, {6, 2, 4, 4}, lut);
    std::vector<float> energy(std::size_t{6} * 2 * 6 * 5);
    for (std::size_t i = 0; i < energy.size(); ++i) energy[i] = 1.0f + static_cast<float>(i) / 1024;
    write_npy<float>(settings.calibration.energy_correction, {6, 2, 6, 5}, energy);
  }
};

TEST(LoadCalibration, LoadsTablesOfTheGeometry) {
  Tables t;
  const Calibration cal = load_calibration(t.settings);
  EXPECT_EQ(cal.position_lut.size(), 6u * 2 * 4 * 4);
  EXPECT_EQ(cal.position_lut[9], 2);
  EXPECT_EQ(cal.energy_bins, 5u);
  EXPECT_EQ(cal.energy_bin_width, 7u);
  ASSERT_EQ(cal.energy_correction.size(), 6u * 2 * 6 * 5);
  EXPECT_EQ(cal.energy_correction[3], 1.0f + 3.0f / 1024);
  EXPECT_TRUE(cal.time_offsets.empty());
  EXPECT_EQ(cal.min_time_offset, 0);
  EXPECT_EQ(cal.max_time_offset, 0);
}

TEST(LoadCalibration, MissingRequiredPath) {
  Tables t;
  Settings s = t.settings;
  s.calibration.position_lut.clear();
  EXPECT_EQ(refusal([&] { load_calibration(s); }), "calibration.position_lut: not set (required)");
  s = t.settings;
  s.calibration.energy_correction.clear();
  EXPECT_EQ(refusal([&] { load_calibration(s); }), "calibration.energy_correction: not set (required)");
  s = t.settings;
  s.calibration.energy_correction = t.dir / "nowhere.npy";
  EXPECT_TRUE(contains(refusal([&] { load_calibration(s); }),
                       (t.dir / "nowhere.npy").string() + ": cannot open"));
}

TEST(LoadCalibration, ShapeMismatchNamesFileExpectedAndFound) {
  Tables t;
  write_npy<std::uint8_t>(t.settings.calibration.position_lut, {6, 2, 4, 3},
                          std::vector<std::uint8_t>(6 * 2 * 4 * 3));
  EXPECT_EQ(refusal([&] { load_calibration(t.settings); }),
            t.settings.calibration.position_lut.string() + ": shape (6, 2, 4, 3), expected (6, 2, 4, 4)");

  Tables u;
  write_npy<float>(u.settings.calibration.energy_correction, {6, 2, 9, 5}, std::vector<float>(6 * 2 * 9 * 5));
  EXPECT_EQ(refusal([&] { load_calibration(u.settings); }),
            u.settings.calibration.energy_correction.string() +
                ": shape (6, 2, 9, 5), expected (6, 2, 6, bins)");
  write_npy<float>(u.settings.calibration.energy_correction, {6, 2, 6}, std::vector<float>(6 * 2 * 6));
  EXPECT_EQ(refusal([&] { load_calibration(u.settings); }),
            u.settings.calibration.energy_correction.string() + ": shape (6, 2, 6), expected (6, 2, 6, bins)");
  write_npy<float>(u.settings.calibration.energy_correction, {6, 2, 6, 0}, {});
  EXPECT_EQ(refusal([&] { load_calibration(u.settings); }),
            u.settings.calibration.energy_correction.string() + ": shape (6, 2, 6, 0), expected (6, 2, 6, bins)");
  write_npy<std::int32_t>(u.settings.calibration.energy_correction, {6, 2, 6, 5},
                          std::vector<std::int32_t>(6 * 2 * 6 * 5));
  EXPECT_EQ(refusal([&] { load_calibration(u.settings); }),
            u.settings.calibration.energy_correction.string() + ": dtype '<i4', expected '<f4'");

  Tables v;
  v.settings.calibration.time_offsets = v.dir / "offsets.npy";
  write_npy<std::int32_t>(v.settings.calibration.time_offsets, {71}, std::vector<std::int32_t>(71));
  EXPECT_EQ(refusal([&] { load_calibration(v.settings); }),
            v.settings.calibration.time_offsets.string() + ": shape (71,), expected (72,)");
}

TEST(LoadCalibration, TimeOffsetsAndTheirRange) {
  Tables t;
  ASSERT_EQ(t.g.crystal_count(), 72u);
  t.settings.calibration.time_offsets = t.dir / "offsets.npy";
  std::vector<std::int32_t> offsets(72, 3);
  offsets[5] = -40;
  offsets[70] = 25;
  write_npy<std::int32_t>(t.settings.calibration.time_offsets, {72}, offsets);
  const Calibration cal = load_calibration(t.settings);
  EXPECT_EQ(cal.time_offsets, offsets);
  EXPECT_EQ(cal.min_time_offset, -40);
  EXPECT_EQ(cal.max_time_offset, 25);
}

// ---- interchange with NumPy itself ----

// A Python interpreter with NumPy, or "" (the test then skips). The python3 first on PATH
// may be a separate installation without NumPy; the system one is tried next.
std::string python_with_numpy() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = std::string(py) + " -c \"import numpy\" >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

TEST(NpyWithNumPy, NumPyReadsOursAndWeReadNumPys) {
  const std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "python3 with numpy not found: interchange with NumPy not checked";
  test::ScratchDir dir;
  write_npy<float>(dir / "ours_f4.npy", {2, 3}, {1.f, 2.f, 3.f, 4.f, 5.f, -0.5f});
  write_npy<std::uint8_t>(dir / "ours_u1.npy", {2, 2}, {0, 1, 254, 255});
  write_npy<std::int32_t>(dir / "ours_i4.npy", {3}, {-7, 0, 2147483647});
  const fs::path script = dir / "check.py";
  std::ofstream(script) << R"(import sys, numpy as np
d = sys.argv[1]
a = np.load(d + '/ours_f4.npy')
assert a.dtype == np.float32 and a.shape == (2, 3) and a.flags['C_CONTIGUOUS'], (a.dtype, a.shape)
assert (a == np.array([[1, 2, 3], [4, 5, -0.5]], dtype=np.float32)).all()
b = np.load(d + '/ours_u1.npy')
assert b.dtype == np.uint8 and b.tolist() == [[0, 1], [254, 255]]
c = np.load(d + '/ours_i4.npy')
assert c.dtype == np.int32 and c.tolist() == [-7, 0, 2147483647]
np.save(d + '/theirs_f4.npy', np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8)
np.save(d + '/theirs_u1.npy', np.array([[3, 255], [0, 9]], dtype=np.uint8))
np.save(d + '/theirs_i4.npy', np.array([-5, 5, -2147483648], dtype=np.int32))
np.save(d + '/theirs_fortran.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
)";
  const std::string cmd = py + " '" + script.string() + "' '" + script.parent_path().string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "numpy refused a file we wrote";

  const auto f4 = read_npy_checked<float>(dir / "theirs_f4.npy", {2, 3, 4});
  for (std::size_t i = 0; i < f4.size(); ++i) EXPECT_EQ(f4[i], static_cast<float>(i) / 8);
  EXPECT_EQ(read_npy_checked<std::uint8_t>(dir / "theirs_u1.npy", {2, 2}),
            (std::vector<std::uint8_t>{3, 255, 0, 9}));
  EXPECT_EQ(read_npy_checked<std::int32_t>(dir / "theirs_i4.npy", {3}),
            (std::vector<std::int32_t>{-5, 5, INT32_MIN}));
  EXPECT_TRUE(contains(refusal([&] { read_npy(dir / "theirs_fortran.npy"); }), "Fortran-ordered"));
}

}  // namespace
}  // namespace petdaq
