// What petdaq-replay sends: a frame file (16-byte frames back to back, as petdaq-sim writes
// them) mapped read-only, or the UDP payloads of a pcap/pcapng capture loaded at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace petdaq::replay {

// A read-only memory map of a whole file; RAII.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws std::runtime_error
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// The whole frames of a frame file; bytes after the last whole frame are reported, not sent.
struct FrameFileInfo {
  std::size_t frame_count = 0;
  std::size_t trailing_bytes = 0;
  std::uint32_t bdm_limit = 0;  // 1 + the largest BDM byte seen (0 when empty)
  std::uint64_t min_time_ticks = 0;
  std::uint64_t max_time_ticks = 0;
};
FrameFileInfo scan_frame_file(const std::uint8_t* data, std::size_t size_bytes);

// One UDP payload of a capture: where it lies in the payload arena, when it was captured and
// which sender (source address and port) it came from.
struct CapturedDatagram {
  std::size_t offset = 0;
  std::uint32_t bytes = 0;
  std::uint32_t source = 0;  // index into Capture::source_names
  std::int64_t time_ns = 0;  // capture time relative to the first UDP packet
};

struct Capture {
  std::vector<std::uint8_t> payloads;  // every UDP payload, back to back
  std::vector<CapturedDatagram> datagrams;
  std::vector<std::string> source_names;  // "address:port" of each distinct sender
  // Packets that were not re-sent, by reason.
  std::uint64_t skipped_not_udp = 0;     // ARP, TCP, ICMP, IPv6 extension headers, ...
  std::uint64_t skipped_fragment = 0;    // IP fragments (cannot be re-sent as one payload)
  std::uint64_t skipped_truncated = 0;   // captured with a snap length shorter than the packet
  std::uint64_t skipped_link_type = 0;   // a link-layer type this tool does not decode
};

// Reads a pcap or pcapng file (libpcap). Throws std::runtime_error when the file cannot be
// opened or is not a capture; damaged packets inside it are counted and skipped.
Capture load_capture(const std::filesystem::path& path);

// Decodes one captured packet of link type `dlt` down to its UDP payload. Returns false (and
// the reason in `*skip_counter`) when it is not a whole, unfragmented UDP datagram.
struct UdpView {
  const std::uint8_t* payload = nullptr;
  std::uint32_t payload_bytes = 0;
  std::string source;  // "address:port"
};
enum class PacketVerdict { udp, not_udp, fragment, truncated, unknown_link };
PacketVerdict decode_packet(int dlt, const std::uint8_t* packet, std::size_t captured_bytes,
                            std::size_t wire_bytes, UdpView& out);

}  // namespace petdaq::replay
