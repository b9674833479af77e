#include "tools/replay/input.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pcap/pcap.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>

#include "proto/bytes.h"
#include "proto/frame.h"

namespace petdaq::replay {

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(path.string() + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path.string() + ": not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(path.string() + ": cannot map: " + std::strerror(err));
    }
    // The file is read once, front to back.
    ::madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

FrameFileInfo scan_frame_file(const std::uint8_t* data, std::size_t size_bytes) {
  FrameFileInfo info;
  info.frame_count = size_bytes / kFrameBytes;
  info.trailing_bytes = size_bytes % kFrameBytes;
  for (std::size_t i = 0; i < info.frame_count; ++i) {
    const std::uint8_t* f = data + i * kFrameBytes;
    const std::uint32_t bdm = frame_bdm(f);
    const std::uint64_t t = frame_time(f);
    if (bdm + 1 > info.bdm_limit) info.bdm_limit = bdm + 1;
    if (i == 0 || t < info.min_time_ticks) info.min_time_ticks = t;
    if (i == 0 || t > info.max_time_ticks) info.max_time_ticks = t;
  }
  return info;
}

namespace {

// IPv4/IPv6 down to UDP. `len` is what the capture holds from `ip` on; `wire_len` what the
// packet had on the wire from `ip` on.
PacketVerdict decode_ip(const std::uint8_t* ip, std::size_t len, std::size_t wire_len,
                        UdpView& out) {
  if (len < 1) return PacketVerdict::truncated;
  const unsigned version = ip[0] >> 4;
  const std::uint8_t* udp = nullptr;
  std::size_t ip_payload_len = 0;  // what the IP header says follows it
  std::size_t header_len = 0;
  char addr[INET6_ADDRSTRLEN] = {};
  if (version == 4) {
    if (len < 20) return PacketVerdict::truncated;
    header_len = std::size_t{ip[0] & 0x0Fu} * 4;
    const std::size_t total_len = bytes::load_be16(ip + 2);
    if (header_len < 20 || total_len < header_len) return PacketVerdict::not_udp;
    const std::uint16_t frag = bytes::load_be16(ip + 6);
    const bool more_fragments = (frag & 0x2000) != 0;
    const std::uint16_t frag_offset = frag & 0x1FFF;
    if (ip[9] != 17) return PacketVerdict::not_udp;
    if (more_fragments || frag_offset != 0) return PacketVerdict::fragment;
    ::inet_ntop(AF_INET, ip + 12, addr, sizeof addr);
    ip_payload_len = total_len - header_len;
  } else if (version == 6) {
    header_len = 40;
    if (len < header_len) return PacketVerdict::truncated;
    // Extension headers (including fragments) are not followed: such packets are skipped.
    if (ip[6] != 17) return PacketVerdict::not_udp;
    ::inet_ntop(AF_INET6, ip + 8, addr, sizeof addr);
    ip_payload_len = bytes::load_be16(ip + 4);
  } else {
    return PacketVerdict::not_udp;
  }
  if (wire_len < header_len + ip_payload_len) return PacketVerdict::not_udp;  // lies about size
  if (len < header_len + 8) return PacketVerdict::truncated;
  udp = ip + header_len;
  const std::size_t udp_len = bytes::load_be16(udp + 4);
  if (udp_len < 8 || udp_len > ip_payload_len) return PacketVerdict::not_udp;
  if (len < header_len + udp_len) return PacketVerdict::truncated;
  out.payload = udp + 8;
  out.payload_bytes = static_cast<std::uint32_t>(udp_len - 8);
  const std::uint16_t port = bytes::load_be16(udp);
  char source[INET6_ADDRSTRLEN + 16];
  std::snprintf(source, sizeof source, version == 6 ? "[%s]:%u" : "%s:%u", addr, unsigned{port});
  out.source = source;
  return PacketVerdict::udp;
}

PacketVerdict decode_ethertype(std::uint16_t ethertype, const std::uint8_t* p, std::size_t len,
                               std::size_t wire_len, UdpView& out) {
  if (ethertype == 0x0800 || ethertype == 0x86DD) return decode_ip(p, len, wire_len, out);
  return PacketVerdict::not_udp;
}

}  // namespace

PacketVerdict decode_packet(int dlt, const std::uint8_t* packet, std::size_t captured_bytes,
                            std::size_t wire_bytes, UdpView& out) {
  const std::uint8_t* p = packet;
  std::size_t len = captured_bytes;
  std::size_t wire = wire_bytes;
  auto skip = [&](std::size_t n) {
    p += n;
    len -= n;
    wire = wire >= n ? wire - n : 0;
  };
  switch (dlt) {
    case DLT_EN10MB: {
      if (len < 14) return PacketVerdict::truncated;
      std::uint16_t ethertype = bytes::load_be16(p + 12);
      skip(14);
      // 802.1Q and 802.1ad tags, possibly stacked.
      while (ethertype == 0x8100 || ethertype == 0x88A8) {
        if (len < 4) return PacketVerdict::truncated;
        ethertype = bytes::load_be16(p + 2);
        skip(4);
      }
      return decode_ethertype(ethertype, p, len, wire, out);
    }
    case DLT_RAW:
#ifdef DLT_IPV4
    case DLT_IPV4:
#endif
#ifdef DLT_IPV6
    case DLT_IPV6:
#endif
      return decode_ip(p, len, wire, out);
    case DLT_NULL:
    case DLT_LOOP: {
      // A 4-byte address family (host order for NULL, network order for LOOP); the IP
      // version nibble says the same and is simpler to trust.
      if (len < 4) return PacketVerdict::truncated;
      skip(4);
      return decode_ip(p, len, wire, out);
    }
    case DLT_LINUX_SLL: {
      if (len < 16) return PacketVerdict::truncated;
      const std::uint16_t protocol = bytes::load_be16(p + 14);
      skip(16);
      return decode_ethertype(protocol, p, len, wire, out);
    }
#ifdef DLT_LINUX_SLL2
    case DLT_LINUX_SLL2: {
      if (len < 20) return PacketVerdict::truncated;
      const std::uint16_t protocol = bytes::load_be16(p);
      skip(20);
      return decode_ethertype(protocol, p, len, wire, out);
    }
#endif
    default:
      return PacketVerdict::unknown_link;
  }
}

namespace {
struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};
}  // namespace

Capture load_capture(const std::filesystem::path& path) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  // Nanosecond time stamps where the file has them (pcapng, nanosecond pcap).
  std::unique_ptr<pcap_t, PcapCloser> pcap(pcap_open_offline_with_tstamp_precision(
      path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf));
  if (!pcap) throw std::runtime_error(path.string() + ": " + errbuf);
  const int dlt = pcap_datalink(pcap.get());

  Capture cap;
  std::map<std::string, std::uint32_t> source_index;
  bool first = true;
  std::int64_t first_ns = 0;
  pcap_pkthdr* header = nullptr;
  const u_char* packet = nullptr;
  int rc = 0;
  while ((rc = pcap_next_ex(pcap.get(), &header, &packet)) == 1) {
    UdpView udp;
    switch (decode_packet(dlt, packet, header->caplen, header->len, udp)) {
      case PacketVerdict::udp:
        break;
      case PacketVerdict::not_udp:
        ++cap.skipped_not_udp;
        continue;
      case PacketVerdict::fragment:
        ++cap.skipped_fragment;
        continue;
      case PacketVerdict::truncated:
        ++cap.skipped_truncated;
        continue;
      case PacketVerdict::unknown_link:
        ++cap.skipped_link_type;
        continue;
    }
    const std::int64_t t_ns = std::int64_t{header->ts.tv_sec} * 1'000'000'000 +
                              std::int64_t{header->ts.tv_usec};  // ns: precision set above
    if (first) {
      first_ns = t_ns;
      first = false;
    }
    auto [it, inserted] =
        source_index.emplace(udp.source, static_cast<std::uint32_t>(cap.source_names.size()));
    if (inserted) cap.source_names.push_back(udp.source);
    CapturedDatagram d;
    d.offset = cap.payloads.size();
    d.bytes = udp.payload_bytes;
    d.source = it->second;
    d.time_ns = t_ns - first_ns;
    cap.payloads.insert(cap.payloads.end(), udp.payload, udp.payload + udp.payload_bytes);
    cap.datagrams.push_back(d);
  }
  if (rc == PCAP_ERROR) {
    // A capture cut short (e.g. the recorder was killed) still yields what came before.
    std::fprintf(stderr, "petdaq-replay: %s: read stopped early: %s\n", path.c_str(),
                 pcap_geterr(pcap.get()));
  }
  return cap;
}

}  // namespace petdaq::replay
