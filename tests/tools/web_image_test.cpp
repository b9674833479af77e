// petdaq-web's "image" message (tools/web/image_message.h) from an image file made with the
// project's writer (core/image.h): the views' shapes and totals against the voxels, the
// brightest voxel, the trace and the axial profile, the block sums past max_side; and the
// intake's checks of `image` messages, each refusal counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/geometry.h"
#include "core/image.h"
#include "core/settings.h"
#include "proto/records.h"
#include "proto/topics.h"
#include "tools/web/image_message.h"
#include "tools/web/intake.h"
#include "tools/web/server.h"

namespace {

using namespace petdaq;
using namespace petdaq::web;
using nlohmann::json;

std::vector<std::uint8_t> known_image(std::uint32_t nx, std::uint32_t ny, std::uint32_t nz) {
  Settings s;
  s.output.image.enabled = true;
  s.output.image.voxel_mm = 4;
  s.output.image.dim_x = nx;
  s.output.image.dim_y = ny;
  s.output.image.dim_z = nz;
  s.output.image.trace_bin_ms = 0.01;
  s.output.image.trace_bins = 40;
  ImageSet set(s);
  const Geometry g = Geometry::from(s.scanner);
  const std::uint32_t ring = g.crystals_per_ring(), mid = g.ring_count() / 2 * ring;
  std::vector<CoincRecord> rs;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    CoincRecord r{};
    r.crystal_a = mid + i % 17;
    r.crystal_b = mid + ring / 2 + (i * 5) % 11;
    r.dt = i % 30;
    r.time_a = 1000 + std::uint64_t{i} * 30000;
    rs.push_back(r);
  }
  set.add_records(rs.data(), rs.size(), false);
  std::vector<std::uint8_t> bytes;
  encode_image_file(set, s, 5, nullptr, ImageSpan{1000, 60'001'000, 1000, 60'001'000}, bytes);
  return bytes;
}

std::string as_text(const std::vector<std::uint8_t>& b) { return std::string(b.begin(), b.end()); }

TEST(WebImageMessage, ViewsTraceAndProfileAgainstTheVoxels) {
  const std::vector<std::uint8_t> bytes = known_image(40, 30, 20);
  const ImageFile f = parse_image_file(bytes.data(), bytes.size());
  const json m = json::parse(image_message(as_text(bytes)));
  EXPECT_EQ(m["type"], "image");
  EXPECT_EQ(m["note"], kImageNote);
  EXPECT_EQ(m["run_id"], 5);
  std::int64_t total = 0;
  std::uint64_t best = 0;
  for (std::uint64_t v = 0; v < f.voxel_count(); ++v) {
    total += f.window_voxel(v);
    if (f.window_voxel(v) > f.window_voxel(best)) best = v;
  }
  ASSERT_GT(total, 1000);
  EXPECT_EQ(m["window_counts"].get<double>(), static_cast<double>(total));
  const double x = f.origin_mm[0] + (best % 40 + 0.5) * f.voxel_mm;
  EXPECT_DOUBLE_EQ(m["max_voxel_mm"][0].get<double>(), x);
  for (const char* v : {"xy", "zx", "zy"}) {
    EXPECT_EQ(m["projections"][v]["total"].get<double>(), static_cast<double>(total)) << v;
    EXPECT_EQ(m["projections"][v]["counts"].size(),
              m["projections"][v]["width"].get<std::size_t>() * m["projections"][v]["height"].get<std::size_t>());
  }
  EXPECT_EQ(m["slices"]["xy"]["width"], 40);
  EXPECT_EQ(m["slices"]["xy"]["height"], 30);
  EXPECT_EQ(m["slices"]["zx"]["width"], 20);
  EXPECT_EQ(m["slices"]["zx"]["height"], 40);
  // The z slice through the brightest voxel holds it, at the top-down row of its y.
  const std::uint32_t by = static_cast<std::uint32_t>((best / 40) % 30);
  EXPECT_EQ(m["slices"]["xy"]["counts"][(29 - by) * 40 + best % 40].get<double>(),
            static_cast<double>(f.window_voxel(best)));
  ASSERT_EQ(m["trace"]["t_s"].size(), f.trace_count);
  ASSERT_GT(f.trace_count, 2u);
  for (std::uint32_t i = 0; i < f.trace_count; ++i)
    EXPECT_DOUBLE_EQ(m["trace"]["z_mm"][i].get<double>(), f.sample(i).mean_mm[2]);
  ASSERT_EQ(m["axial"]["counts"].size(), 20u);
  double axial = 0;
  for (const json& c : m["axial"]["counts"]) axial += c.get<double>();
  EXPECT_EQ(axial, static_cast<double>(total));
  // Past max_side, blocks: 40 x 30 in blocks of 2 (max_side 25).
  ImageLimits small;
  small.max_side = 25;
  small.max_trace_samples = 2;
  const json s = json::parse(image_message(as_text(bytes), small));
  EXPECT_EQ(s["projections"]["xy"]["width"], 20);
  EXPECT_EQ(s["projections"]["xy"]["height"], 15);
  EXPECT_EQ(s["projections"]["xy"]["bin"], 2);
  EXPECT_EQ(s["projections"]["xy"]["total"].get<double>(), static_cast<double>(total));
  EXPECT_EQ(s["trace"]["t_s"].size(), 2u);
}

class WebImageIntakeTest : public ::testing::Test {
 protected:
  ServerOptions options() {
    ServerOptions o;
    o.listen = {boost::asio::ip::make_address("127.0.0.1"), 0};
    return o;
  }
  WebCounters counters;
  Server server{options(), counters};
  Intake intake{"inproc://nobody", server, counters};

  void take(std::vector<std::string> frames) {
    std::vector<std::string_view> views(frames.begin(), frames.end());
    intake.take(views.data(), views.size());
  }
  static std::string header(std::uint32_t magic, MessageKind kind) {
    MessageHeader h;
    h.magic = magic;
    h.kind = static_cast<std::uint16_t>(kind);
    std::string bytes(kMessageHeaderBytes, '\0');
    encode_message_header(h, reinterpret_cast<std::uint8_t*>(bytes.data()));
    return bytes;
  }
};

TEST_F(WebImageIntakeTest, CountsAndSkipsWhatItCannotUse) {
  const std::string body = as_text(known_image(8, 8, 8));
  const std::string good = header(kMessageMagic, MessageKind::image);
  const std::string topic(topic::image);
  take({topic, good, body});                                         // good
  take({topic, good, std::string(300, 'x')});                        // not an image file
  take({topic, good, body.substr(0, body.size() - 8)});              // truncated
  take({topic, header(kMessageMagic, MessageKind::histograms), body});  // another kind
  take({topic, header(0x12345678, MessageKind::image), body});       // wrong magic
  take({topic, good.substr(0, 60), body});                           // short header
  take({topic, good});                                               // two frames
  take({"imageX", good, body});                                      // another topic
  EXPECT_EQ(counters.get(WebCounter::image_received), 7u);
  EXPECT_EQ(counters.get(WebCounter::image_malformed), 6u);
  EXPECT_EQ(counters.get(WebCounter::messages_malformed), 1u);
}

}  // namespace
