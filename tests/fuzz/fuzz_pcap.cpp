// petdaq-replay's capture input on arbitrary bytes: the packet decoder on one packet of a
// fuzzed link type, and the whole pcap/pcapng loader (libpcap) on the bytes as a file. A
// payload found lies inside its packet; a bad file is a std::runtime_error.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "fuzz_file.h"
#include "tools/replay/input.h"

using namespace petdaq::replay;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  if (data[0] & 1) {
    const int dlt = data[1];
    UdpView v;
    const std::uint8_t* packet = data + 2;
    const std::size_t n = size - 2;
    if (decode_packet(dlt, packet, n, n + (data[0] >> 1 & 7), v) == PacketVerdict::udp &&
        (v.payload < packet || v.payload + v.payload_bytes > packet + n))
      std::abort();
    return 0;
  }
  const auto path = petdaq::fuzz::input_file("capture.pcap", data + 1, size - 1);
  try {
    const Capture c = load_capture(path);
    (void)c.datagrams.size();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
